"""NeMo's English text normaliser (nemo_text_processing's weighted finite-state grammars), run only
on the windows of a text that need it, with its grammars compiled once into a cache directory.

Why windows: the library composes its grammars with the whole sentence, ~1 ms a character (~134 ms
a sentence on a busy vCPU, issue 65), while plain words pass through it unchanged. Only the pieces
with a digit, a symbol, an abbreviation or a capitalised acronym are given to it, each with the
word before it ("Circle Dr.", "City, MO") and the pieces after or before it that attach (a month's
name, a comma between numbers, a unit); the context it echoes back is split off again, so the
mapping back (pieces.py) stays word for word where it can. On GoogleTN's changed rows this reads
as well as whole sentences (65% against 64%) in about a quarter of the time (docs/PERFORMANCE.md).

Why a cache: compiling the grammars takes 40-200 s; `build` (run by `make setup`) writes them to
`cache_dir` as .far files and each later process loads them in seconds.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any
from pathlib import Path

from .pieces import Piece

# What a window grows over: a month's or a day's name, a comma or dash between numbers, a unit
# or a scale after one. Each character costs the library ~1 ms (its composition with the tagger
# grows with the text), so windows stay as short as the reading needs.
_ATTACHES = re.compile(
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?"
    r"|[,\-–/:]|[a-zA-Zμ°²³]{1,4}\.?|(?:hundred|thousand|million|billion|trillion|percent|cents?|dollars?)")
# What needs the library: digits, symbols, capitalised acronyms, abbreviations.
_NEEDS = re.compile(r"\d|[$€£¥%°@&#/+=~^]|\b[A-Z]{2,}\b|\w\.\w|^(?:Dr|Mr|Mrs|Ms|St|Jr|Sr|Prof|vs|etc|Mt|Ft|No|Maj|Gen|Capt|Col|Lt|Sgt|Ave|Blvd|Rd)\."
                    r"|^(?:st|St)$|^(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\b")


class LibraryMissing(RuntimeError):
    """The normaliser's library is not installed (requirements.txt installs it)."""


def _load(cache_dir: Path):
    try:
        from nemo_text_processing.text_normalization.normalize import Normalizer
    except ImportError as e:
        raise LibraryMissing(f"text_normalization 'nemo' needs nemo_text_processing and pynini ({e})") from None
    import logging

    logging.getLogger("NeMo-text-processing").setLevel(logging.WARNING)  # its INFO lines, per grammar
    cache_dir.mkdir(parents=True, exist_ok=True)
    return Normalizer(input_case="cased", lang="en", cache_dir=str(cache_dir), overwrite_cache=False)


class NemoNormalizer:
    """One Normalizer, loaded on first use (from cache_dir when built there); thread-safe."""

    def __init__(self, cache_dir: Path):
        self.cache_dir = Path(cache_dir)
        self._normalizer: Any = None  # nemo_text_processing's Normalizer (untyped), made on first use
        self._lock = threading.Lock()

    def load(self) -> "NemoNormalizer":
        with self._lock:
            if self._normalizer is None:
                self._normalizer = _load(self.cache_dir)
        return self

    def sentence(self, text: str) -> str:
        """The library's reading of a whole text (the benchmark's baseline: no windows)."""
        return self.load()._normalizer.normalize(text, punct_post_process=True)

    def pieces(self, pieces: Sequence[Piece]) -> list[Piece]:
        """Every window of `pieces` that needs the library, read by it; the rest as they were."""
        out: list[Piece] = []
        i = 0
        needs = [bool(_NEEDS.search(p.spoken)) for p in pieces]
        attaches = [bool(_ATTACHES.fullmatch(p.spoken)) for p in pieces]
        for lo, hi in windows(needs, attaches):
            out += pieces[i:lo]
            out += self._window(pieces[lo:hi])
            i = hi
        return out + list(pieces[i:])

    def _window(self, window: Sequence[Piece]) -> list[Piece]:
        spoken = self.sentence(" ".join(p.spoken for p in window)).split()
        head = list(window)
        kept_front: list[Piece] = []
        while len(head) > 1 and spoken and spoken[0] == head[0].spoken:  # context echoed back as it was
            kept_front.append(head.pop(0))
            spoken.pop(0)
        kept_back: list[Piece] = []
        while len(head) > 1 and spoken and spoken[-1] == head[-1].spoken:
            kept_back.insert(0, head.pop())
            spoken.pop()
        if not spoken:  # the library read the rest as nothing: keep it as written, never drop it
            return list(window)
        return kept_front + [Piece(" ".join(p.written for p in head), " ".join(spoken))] + kept_back


def windows(needs: Sequence[bool], attaches: Sequence[bool]) -> list[tuple[int, int]]:
    """[lo, hi) ranges covering each piece that needs the library, grown over the pieces either
    side that attach to it (a month's name, a comma between numbers, a unit), overlapping or
    touching ranges merged."""
    out: list[tuple[int, int]] = []
    for k, need in enumerate(needs):
        if not need:
            continue
        lo, hi = max(0, k - 1), k + 1  # a word before: "Circle Dr.", "City, MO"
        while lo > 0 and attaches[lo - 1]:
            lo -= 1
        while hi < len(needs) and (attaches[hi] or needs[hi]):
            hi += 1
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out
