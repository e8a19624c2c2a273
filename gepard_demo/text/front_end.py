"""The text front end: what was written -> what the model reads, with the mapping back.

    text -> lexicon (lexicon.py) -> normaliser (rules.py, then the library: library.py) -> prompt

`TEXT_NORMALIZATIONS` are the `text_normalization` setting's values (settings.py declares it):
  off    the text as written (the prompt's own clean-up only): today's behaviour and the default,
         until the real weights show that normalising helps;
  rules  our own layer alone (phone numbers, times, money, ordinals, ranges, then the remaining
         numbers and symbols): no library, microseconds a sentence;
  nemo   our layer, then NeMo's English grammars on the windows that still need them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import rules
from .lexicon import EMPTY, Lexicon
from .library import NemoNormalizer
from .pieces import Piece, split, spoken_text, written_text

OFF, RULES, NEMO = "off", "rules", "nemo"
TEXT_NORMALIZATIONS = (OFF, RULES, NEMO)


def default_cache_dir(cache_root: str | Path | None = None) -> Path:
    """Where NeMo's compiled grammars live: under the demo's cache (GEPARD_CACHE_DIR, read by the
    entry points and passed here), else ~/.cache/gepard-demo."""
    root = Path(cache_root).expanduser() if cache_root else Path.home() / ".cache" / "gepard-demo"
    return root / "text-normalization" / "nemo"


@dataclass(frozen=True)
class Reading:
    """A text as the model will read it: `pieces` map each run of written tokens to its words."""

    pieces: tuple[Piece, ...]

    @property
    def spoken(self) -> str:
        return spoken_text(self.pieces)

    @property
    def written(self) -> str:
        return written_text(self.pieces)


class FrontEnd:
    """One per process (`shared`): the library normaliser, loaded on its first use, and the
    server-wide lexicon (`--lexicon FILE`), which a request's own entries extend and override."""

    def __init__(self, cache_dir: str | Path | None = None, lexicon: Lexicon = EMPTY):
        self.nemo = NemoNormalizer(Path(cache_dir) if cache_dir else default_cache_dir())
        self.lexicon = lexicon

    def read(self, text: str, mode: str = OFF, lexicon: Lexicon = EMPTY) -> Reading:
        if mode not in TEXT_NORMALIZATIONS:
            raise ValueError(f"text_normalization must be one of {TEXT_NORMALIZATIONS}, got {mode!r}")
        pieces = self.lexicon.extended(lexicon).apply(split(text))
        if mode != OFF:
            pieces = rules.apply(pieces)
        if mode == NEMO:
            pieces = self.nemo.pieces(pieces)
        elif mode == RULES:
            pieces = rules.apply(pieces, rules.PLAIN_NUMBERS)
        return Reading(tuple(pieces))

    def spoken(self, text: str, mode: str = OFF, lexicon: Lexicon = EMPTY) -> str:
        """The text the model will read: as written where nothing applies (mode off, no lexicon)."""
        if mode == OFF and not lexicon.entries and not self.lexicon.entries:
            return text
        return self.read(text, mode, lexicon).spoken


_SHARED: list[FrontEnd] = []


def shared() -> FrontEnd:
    """The process's front end (model/engine.py reads every prompt's text through it)."""
    if not _SHARED:
        _SHARED.append(FrontEnd())
    return _SHARED[0]


def spoken_for(text: str, text_normalization: str = OFF, lexicon_entries: str = "") -> str:
    """What the model reads for `text` under a request's two settings (SamplingSettings'
    text_normalization and lexicon_entries): the engine's prompt, a take's and eval's rows read it here."""
    from .lexicon import parse_cached

    return shared().spoken(text, text_normalization, parse_cached(lexicon_entries, "lexicon_entries"))


def configure(cache_dir: str | Path | None = None, lexicon: Lexicon = EMPTY) -> FrontEnd:
    """Set the process's front end up, once, from an entry point's flags (its grammar cache under
    GEPARD_CACHE_DIR, the server-wide --lexicon)."""
    _SHARED[:] = [FrontEnd(cache_dir, lexicon)]
    return _SHARED[0]


def library_available() -> bool:
    """Whether the "nemo" mode can run here (nemo_text_processing installed), without importing it."""
    import importlib.util

    return importlib.util.find_spec("nemo_text_processing") is not None
