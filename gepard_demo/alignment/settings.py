"""What the aligner runs with: one frozen dataclass, made by an entry point and passed down."""

from __future__ import annotations

from dataclasses import dataclass

from gepard_demo.settings import SettingsError

# A word below this confidence is "low": shown greyed, never highlighted (DESIGN: "When each
# word is spoken"). With refine.py's STRETCH 1.5, SLACK_S 0.15 s and SHORT 0.33, calibrated on
# Piper speech (tiny.en): of 697 words of 70 clean sentences of the core set, 9 (1.3%) come out low
# or unaligned; in each of four loops (a phrase or a word said two to four times, the text saying
# it once) the words whose spans hold the repeat come out low.
LOW_CONFIDENCE = 0.7
# Weights joined by "+" align with each and take the median of their readings' spans (aligner.py).
# The two bundled sizes err apart inside connected speech (tiny.en late, base early, each by up to
# 0.6 s on its own words), so one far off is outvoted, at about three times tiny.en's cost
# (docs/PERFORMANCE.md §10).
ENSEMBLE = "+"
DEFAULT_WEIGHTS = "tiny.en+base"


@dataclass(frozen=True)
class AlignmentSettings:
    """weights: Whisper weights, a size ("tiny.en", "base") or a local path (alignment/weights.py),
        or several joined by "+" (the default: tiny.en and base, the median of their readings; ENSEMBLE).
    cache_dir: where converted weights are kept (None: ~/.cache/gepard-eval).
    low_confidence: a word under this confidence is "low" (see LOW_CONFIDENCE).
    trim_context: run Whisper's encoder on the audio's own length instead of a 30 s window (what
        whisper.cpp calls audio_ctx): 8-10x cheaper, the same boundaries on Piper speech (the
        benchmark prints both).
    """

    weights: str = DEFAULT_WEIGHTS
    cache_dir: str | None = None
    low_confidence: float = LOW_CONFIDENCE
    trim_context: bool = True

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "AlignmentSettings":
        if not isinstance(self.weights, str) or not all(m.strip() for m in self.weights.split(ENSEMBLE)):
            raise SettingsError("weights must name Whisper weights (a size such as 'tiny.en', a path, or several "
                                f"joined by {ENSEMBLE!r}), got {self.weights!r}", "weights")
        if not 0.0 <= self.low_confidence <= 1.0:
            raise SettingsError(f"low_confidence must be in [0, 1], got {self.low_confidence}", "low_confidence")
        return self

    @property
    def members(self) -> tuple[str, ...]:
        """The weights the aligner runs: one, or each of an ensemble."""
        return tuple(m.strip() for m in self.weights.split(ENSEMBLE))
