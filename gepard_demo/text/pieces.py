"""The mapping back from spoken words to written tokens: a text as `Piece`s, each a run of written
tokens beside the words they are spoken as. Every stage of the front end (lexicon.py, rules.py, the
library normaliser) rewrites spans of the spoken side; a rewrite that crosses pieces merges them,
so every written token stays inside exactly one piece, in order, and the pieces' spoken words
joined are what the model reads.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Piece:
    """written: one or more written tokens (space-joined); spoken: the words they become."""

    written: str
    spoken: str

    @property
    def changed(self) -> bool:
        return self.written != self.spoken


def split(text: str) -> list[Piece]:
    """A text as one piece per whitespace-separated token, each spoken as written."""
    return [Piece(token, token) for token in text.split()]


def spoken_text(pieces: Sequence[Piece]) -> str:
    return " ".join(p.spoken for p in pieces)


def written_text(pieces: Sequence[Piece]) -> str:
    return " ".join(p.written for p in pieces)


def _merge(pieces: Sequence[Piece], spoken: str) -> Piece:
    return Piece(" ".join(p.written for p in pieces), " ".join(spoken.split()))


def rewrite(pieces: Sequence[Piece], pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str]) -> list[Piece]:
    """Each match of `pattern` in the spoken text replaced by `replace(match)`; the pieces a match
    touches become one, whose spoken side is their text with the match replaced."""
    kept = list(pieces)  # every piece says something: a stage never rewrites a token to nothing
    joined = " ".join(p.spoken for p in kept)
    starts, at = [], 0
    for p in kept:
        starts.append(at)
        at += len(p.spoken) + 1
    clusters: list[list] = []  # [first piece, last piece, matches], pieces overlapping merged
    for m in pattern.finditer(joined):
        if m.start() == m.end():
            continue
        first = max(k for k in range(len(kept)) if starts[k] <= m.start())
        last = max(k for k in range(len(kept)) if starts[k] < m.end())
        if clusters and first <= clusters[-1][1]:
            clusters[-1][1] = max(last, clusters[-1][1])
            clusters[-1][2].append(m)
        else:
            clusters.append([first, last, [m]])
    out: list[Piece] = []
    i = 0
    for first, last, matches in clusters:
        out += kept[i:first]
        at, spoken = starts[first], []
        for m in matches:
            spoken += [joined[at:m.start()], replace(m)]
            at = m.end()
        spoken.append(joined[at:starts[last] + len(kept[last].spoken)])
        out.append(_merge(kept[first:last + 1], "".join(spoken)))
        i = last + 1
    return out + kept[i:]
