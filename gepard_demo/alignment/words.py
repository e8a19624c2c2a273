"""The words of a text that can be timed, cut as vLLM-Omni cuts them for `word_timestamps`.

vLLM-Omni's word units (vllm_omni/utils/qwen3_force_align_processor.py, `_tokenize_space_lang`,
the whitespace and Chinese-mixed path it uses without qwen_asr): split on whitespace, keep only
letters and digits of any script and the apostrophe, drop a piece left empty (punctuation, emoji),
and make each CJK ideograph a word of its own. `X-Word-Timestamps` lists exactly these words, so a
client that re-segments the request's text the same way pairs them up
(tests/serving/test_timestamps.py checks the cut against the wheel's).

Each `TextWord` also keeps the piece as written ("Dr.", "9:30,"): the page and subtitles show
it; Whisper is given it without the punctuation at its edges (`whisper_text`).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
               (0x2B820, 0x2CEAF), (0xF900, 0xFAFF))


@dataclass(frozen=True)
class TextWord:
    word: str  # vLLM-Omni's unit: letters, digits and apostrophes only
    written: str  # the whitespace piece it comes from, punctuation kept
    piece: int  # the piece's index among the text's kept pieces (a CJK piece holds several words)


def _cjk(ch: str) -> bool:
    code = ord(ch)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def _kept(ch: str) -> bool:
    return ch == "'" or unicodedata.category(ch)[0] in "LN"


def _split_cjk(clean: str) -> list[str]:
    out, buf = [], ""
    for ch in clean:
        if _cjk(ch):
            if buf:
                out.append(buf)
                buf = ""
            out.append(ch)
        else:
            buf += ch
    return out + ([buf] if buf else [])


def text_words(text: str) -> list[TextWord]:
    """The text's timeable words in order (vLLM-Omni's segmentation, see the module doc)."""
    out: list[TextWord] = []
    piece = 0
    for written in text.split():
        clean = "".join(ch for ch in written if _kept(ch))
        if not clean:
            continue
        out.extend(TextWord(w, written, piece) for w in _split_cjk(clean))
        piece += 1
    return out


_SPOKEN_SIGNS = "$%£€&@#+"  # read out as words: kept at a piece's edge for Whisper
_ACRONYM = re.compile(r"[A-Z]{2,5}")  # an acronym, most of which are said letter by letter


def whisper_text(written: str) -> str:
    """A piece as Whisper is given it: without the punctuation at its edges ("park," -> "park",
    '"Hello?"' -> "Hello"), inner marks and spoken signs kept ("9:30", "don't", "$42.50"), and an
    acronym as its letters ("GPS" -> "G P S").
    Punctuation tokens of their own would take frames from the word beside them: the DTW gives a
    comma the pause after it, and with it, measured on Piper, sometimes the whole word before.
    An acronym is one or two tokens but said letter by letter, three syllables for "GPS": the DTW
    gave it the frames of one and ended it 0.1-0.35 s early; as letters each gets its own."""
    keep = lambda ch: ch.isalnum() or ch in _SPOKEN_SIGNS  # noqa: E731
    a, b = 0, len(written)
    while a < b and not keep(written[a]):
        a += 1
    while b > a and not keep(written[b - 1]):
        b -= 1
    text = written[a:b] or written
    return " ".join(text) if _ACRONYM.fullmatch(text) else text


_HISSING_END = re.compile(r"(s|z|x|ce|se|ze|sh|ch|ge)$", re.IGNORECASE)  # "leaves", "box", "voice", "finish", "GPS"


def ends_hissing(word: str) -> bool:
    """Whether the word's spelling ends in a sibilant ("s", "z", "sh", "ch", a soft "ce" or "ge"),
    a sound of noise that refine's hiss step can find the end of. Spelling only: "stomach" counts
    (the step then mostly finds no noise to follow), a number ("6") does not."""
    return bool(_HISSING_END.search(word))


def spoken_letters(word: str) -> int:
    """How long a word takes to say, in letters: a digit counts 3 (digits are read out as words,
    "14" is "fourteen"), an apostrophe nothing."""
    return sum(3 if ch.isdigit() else 1 for ch in word if ch != "'") or 1
