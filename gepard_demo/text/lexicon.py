"""A pronunciation lexicon: written words -> what to say instead, applied before the normaliser.

Two forms: a W3C PLS document (https://www.w3.org/TR/pronunciation-lexicon/) whose lexemes each
have `<grapheme>`s and an `<alias>` (what ElevenLabs, Azure and Polly take), or plain entries
"written = spoken", a new line or a ";" between them. A match is whole words, case-sensitive as PLS defines graphemes; the longest
grapheme wins where two start at one word. Gepard reads text, not phonemes: a `<phoneme>` is refused.

Every refusal is a `LexiconError` naming the field it came in (`lexicon` on every surface).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

from gepard_demo.bounded import Bounded

from .pieces import Piece, rewrite

PLS_NS = "http://www.w3.org/2005/01/pronunciation-lexicon"
MAX_LEXICON_CHARS = 200_000
MAX_ENTRIES = 2000
MAX_ALIAS_CHARS = 200
FIELD = "lexicon"


class LexiconError(ValueError):
    """A lexicon that cannot be used; `field` names the request field or flag it came in."""

    def __init__(self, message: str, field: str = FIELD):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Lexicon:
    """grapheme -> alias, whole words, case-sensitive."""

    entries: tuple[tuple[str, str], ...]

    def __post_init__(self):
        _check(self.entries)

    @property
    def pattern(self) -> re.Pattern[str]:
        graphemes = sorted((g for g, _ in self.entries), key=len, reverse=True)
        return re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, graphemes)) + r")(?!\w)")

    def extended(self, other: "Lexicon") -> "Lexicon":
        """This lexicon with `other`'s entries added, `other`'s winning where both have a grapheme."""
        if not other.entries:
            return self
        mine = dict(self.entries)
        mine.update(other.entries)
        return Lexicon(tuple(mine.items()))

    def apply(self, pieces: Sequence[Piece]) -> list[Piece]:
        if not self.entries:
            return list(pieces)
        alias = dict(self.entries)
        return rewrite(pieces, self.pattern, lambda m: alias[m[0]])



def _check(entries: Sequence[tuple[str, str]]) -> None:
    if len(entries) > MAX_ENTRIES:
        raise LexiconError(f"lexicon has {len(entries)} entries; at most {MAX_ENTRIES}")
    for grapheme, alias in entries:
        if not grapheme.strip() or not alias.strip():
            raise LexiconError(f"lexicon entry {grapheme!r} = {alias!r}: both sides must say something")
        if len(alias) > MAX_ALIAS_CHARS:
            raise LexiconError(f"lexicon alias for {grapheme!r} is over {MAX_ALIAS_CHARS} characters")
        if re.search(r"(?<!\w)" + re.escape(grapheme) + r"(?!\w)", alias):
            raise LexiconError(f"lexicon entry {grapheme!r} loops: its alias {alias!r} contains it")


EMPTY = Lexicon(())


def parse(text: str, field: str = FIELD) -> Lexicon:
    """A PLS document (it starts with "<") or "written = spoken" lines (# comments, blank lines)."""
    if not isinstance(text, str):
        raise LexiconError(f"{field} must be text (a PLS document or 'written = spoken' lines)", field)
    if len(text) > MAX_LEXICON_CHARS:
        raise LexiconError(f"{field} is {len(text)} characters; at most {MAX_LEXICON_CHARS}", field)
    try:
        return Lexicon(tuple(_pls(text) if text.lstrip().startswith("<") else _plain(text)))
    except LexiconError as e:
        raise LexiconError(str(e).replace("lexicon", field, 1), field) from None


def parse_cached(text: str, field: str = FIELD) -> Lexicon:
    """parse(), the last few lexicons kept: a request's entries are checked where its settings are
    validated and read again where its prompt is made."""
    key = (text, field)
    if key not in _PARSED:
        _PARSED[key] = parse(text, field)
    return _PARSED[key]


_PARSED: Bounded[tuple[str, str], Lexicon] = Bounded(32)


def _plain(text: str) -> list[tuple[str, str]]:
    out = []
    for n, line in enumerate(re.split(r"[\n;]", text), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "=" not in line:
            raise LexiconError(f"lexicon entry {n}: {line!r} is not 'written = spoken' (nor is the text PLS)")
        written, spoken = (s.strip() for s in line.split("=", 1))
        out.append((written, spoken))
    return out


def _pls(text: str) -> list[tuple[str, str]]:
    if "<!DOCTYPE" in text or "<!ENTITY" in text:  # entity expansion is how an XML bomb grows
        raise LexiconError("lexicon: a PLS document may not declare a DOCTYPE or entities")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise LexiconError(f"lexicon is not well-formed XML ({e})") from None
    if root.tag != f"{{{PLS_NS}}}lexicon":
        raise LexiconError(f"lexicon is not PLS: its root must be <lexicon xmlns=\"{PLS_NS}\">, got <{root.tag}>")
    out = []
    for n, lexeme in enumerate(root.iter(f"{{{PLS_NS}}}lexeme"), 1):
        if lexeme.find(f"{{{PLS_NS}}}phoneme") is not None:
            raise LexiconError(f"lexicon lexeme {n} has a <phoneme>: Gepard reads text, not phonemes; "
                               "write what to say as an <alias>")
        graphemes = [" ".join((g.text or "").split()) for g in lexeme.iter(f"{{{PLS_NS}}}grapheme")]
        aliases = [" ".join((a.text or "").split()) for a in lexeme.iter(f"{{{PLS_NS}}}alias")]
        if not graphemes or not aliases:
            raise LexiconError(f"lexicon lexeme {n} needs a <grapheme> and an <alias>")
        out += [(g, aliases[0]) for g in graphemes]
    return out
