"""Text that arrives in pieces (a language model's tokens) cut into units to speak: vLLM-Omni's
speech WebSocket splitter (`speech_text_splitter.py` in the 0.30 wheel), rule for rule, so a
client sees the same sentences from our server as from vLLM-Omni (tests/streaming/test_text_splitter.py
checks it against the wheel's own on hard cases). It is the house's one sentence rule: a long
text's segments are packed from the same sentences (`sentences`, used by text_input.split_text),
so an abbreviation at a segment's edge stays with its sentence there as it does here.

- "none": nothing is cut until the flush (`input.done`): one unit, the whole text.
- "sentence": a unit ends at . ! ? or a script's own sentence mark (CJK, Devanagari danda,
  Arabic question mark); "clause" also at , ; and their script forms.
- An ASCII mark ends a unit only when whitespace or the flush follows it (3.14, 1,000, a.m.,
  example.com stay whole); a script mark as soon as the next character is known.
- Not a mark: the dot of an abbreviation (Dr., e.g.) or of an initial (J. R. R.).
- The run of marks and closing quotes / brackets after a mark stays with its unit (`Wait...`,
  `He said "Hello."`); a run at the very end waits for the next piece, which may extend it.
"""

from __future__ import annotations

GRANULARITIES = ("none", "sentence", "clause")

_ASCII_SENTENCE = frozenset(".!?")
_ASCII_CLAUSE = _ASCII_SENTENCE | frozenset(",;")
_SCRIPT_SENTENCE = frozenset("。！？…।॥؟")  # CJK, the ellipsis, Devanagari dandas, Arabic ?
_SCRIPT_CLAUSE = _SCRIPT_SENTENCE | frozenset("，；،؛")  # CJK and Arabic comma and semicolon
MARKS = {"sentence": _ASCII_SENTENCE | _SCRIPT_SENTENCE, "clause": _ASCII_CLAUSE | _SCRIPT_CLAUSE}
_CLOSERS = frozenset("\"'”’»)]}』」）】")
_RUN = MARKS["clause"] | _CLOSERS  # what a unit's closing run may hold

# Words whose dot does not end a sentence (any single letter neither: an initial).
ABBREVIATIONS = frozenset({"dr", "mr", "mrs", "ms", "prof", "sr", "jr", "st", "mt", "fig", "no", "vs", "etc",
                           "approx", "dept", "inc", "ltd", "co", "al", "e.g", "i.e", "u.s", "u.k", "a.m", "p.m"})
_LONGEST = max(map(len, ABBREVIATIONS))


def _in_word(ch: str) -> bool:
    return ch.isalnum() or ch == "."


def _in_number(text: str, i: int) -> bool:
    """The . or , of 3.14 or 1,000: a digit on both sides."""
    return text[i] in ".," and 0 < i < len(text) - 1 and text[i - 1].isdigit() and text[i + 1].isdigit()


def _abbreviated(text: str, i: int) -> bool:
    """The dot of an abbreviation or an initial. The word is read back at most as far as the
    longest abbreviation, so a run of dots costs the same at every dot."""
    if text[i] != ".":
        return False
    start, stop = i, max(0, i - _LONGEST)
    while start > stop and _in_word(text[start - 1]):
        start -= 1
    if start > 0 and _in_word(text[start - 1]):  # longer than any abbreviation
        return False
    word = text[start:i]
    return bool(word) and ((len(word) == 1 and word.isalpha()) or word.lower().strip(".") in ABBREVIATIONS)


class TextSplitter:
    """One utterance's splitter: `feed` each piece as it comes, `flush` at its end. Each returns
    the units completed, in order; what is not yet a unit waits in the buffer."""

    def __init__(self, granularity: str = "none"):
        if granularity not in GRANULARITIES:
            raise ValueError(f"split_granularity must be one of {', '.join(GRANULARITIES)}, got {granularity!r}")
        self.granularity = granularity
        self._text = ""
        self._seen = 0  # how much of the buffer is already known to hold no unit's end

    def feed(self, piece: str) -> list[str]:
        self._text += piece
        return [] if self.granularity == "none" else self._cut(flush=False)

    def flush(self) -> list[str]:
        if self.granularity == "none":
            whole, self._text, self._seen = self._text.strip(), "", 0
            return [whole] if whole else []
        return self._cut(flush=True)

    def _cut(self, flush: bool) -> list[str]:
        text, marks = self._text, MARKS[self.granularity]
        units: list[str] = []
        start, i, n = 0, self._seen, len(text)
        while i < n:
            if text[i] not in marks or _in_number(text, i) or _abbreviated(text, i):
                i += 1
                continue
            end = i + 1
            while end < n and text[end] in _RUN:
                end += 1
            if end == n and not flush:  # the run may go on in the next piece: look again then
                self._text, self._seen = text[start:], i - start
                return units
            if text[i] in _ASCII_CLAUSE and end < n and not text[end].isspace():
                i = end  # an ASCII mark inside a word (a.b, x,y): no unit ends here
                continue
            if unit := text[start:end].strip():
                units.append(unit)
            i = end
            while i < n and text[i].isspace():
                i += 1
            start = i
        rest = text[start:]
        if flush:
            if rest.strip():
                units.append(rest.strip())
            rest = ""
        self._text, self._seen = rest, len(rest)
        return units


def sentences(text: str) -> list[str]:
    """A whole text's sentences by the rule above, as the WebSocket cuts it when the text comes in
    one piece and then the flush."""
    splitter = TextSplitter("sentence")
    return splitter.feed(text) + splitter.flush()
