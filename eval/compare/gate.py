"""A gate file: how much worse the new run may be, per measure, overall, per category and per voice.

YAML (eval/gates/example.yaml is a commented one):

    overall:              # every utterance
      corpus_wer: 0.01    # corpus WER may rise by at most 1 point
      loop: 0             # the loop rate may not rise at all
      dnsmos_ovrl: 0.1    # lower is worse here: it may fall by at most 0.1
    categories:
      "*":                # every category of the set
        corpus_wer: 0.01
      casual:             # one category, over "*"
        corpus_wer: 0.02
    voices:               # runs in saved voices (eval run --voice), each voice's pairs
      "*":
        speaker_sim: 0.02 # no voice's similarity to its own clip may fall by more than 0.02

A limit is judged at 95%: a measure breaches it when its interval's bound on the better side is
still worse than the limit, i.e. the run is *significantly* worse by more than allowed (a rise
whose interval reaches back below the limit passes: the data cannot tell it apart from noise).
"Worse" is the measure's own direction (table.MEASURES: up for WER and failure rates, down for
DNSMOS and speaking rate); for F0, which has no worse side, the limit bounds the change either
way. A measure or category the gate names that the comparison does not have is an error (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from .table import ALL, MEASURES, CompareError, Comparison, fmt


# What a measure needs from both runs, for the refusal of a gate that limits one they lack.
NEEDS = {
    "": "the audio measures (`python -m eval score` makes them)",
    "runaway": "a frame budget (Gepard's engines; Piper and --engine files rows have none)",
    "force_stop": "rows that say how they ended (Gepard's engines of this version; vLLM-Omni, Piper and files rows "
                  "cannot be force-stopped)",
    "derail": "the probe's entropy traces (local, local-stream, our server; none from vLLM-Omni, Piper, files) "
              "and rows of at least the derail rule's judge_from frames",
    "clean": "ASR scores (`python -m eval score`)",
    "reward": "ASR scores (`python -m eval score`)",
    "stop_lag_ms": "a stop head (Gepard's engines) and the audio measures (`python -m eval score`)",
    "dnsmos_ovrl": "DNSMOS scores (`python -m eval score`, on unless --dnsmos off), which exist only for a clip with "
                   "at least 1 s of speech that Silero VAD finds: noise, as the random-weight tiny makes, has none",
    "server_error": "--engine server rows",
    "speaker_sim": "rows with a reference voice (--ref-audio, --voice or a set's ref_audio column) in both runs",
}


class GateError(CompareError):
    """A gate file that cannot be applied: its text, a measure or a category it names."""


@dataclass(frozen=True)
class Gate:
    limits: dict[str, dict[str, float]]  # category ("all", "*", a name) -> measure -> allowed worsening
    voice_limits: dict[str, dict[str, float]] = field(default_factory=dict)  # voice ("*", a name, lower case) -> ...

    @classmethod
    def load(cls, path: str | Path) -> "Gate":
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise GateError(f"gate file {path}: {exc}") from None
        return cls.parse(raw, str(path))

    @classmethod
    def parse(cls, raw: dict, where: str = "the gate") -> "Gate":
        if not isinstance(raw, dict) or set(raw) - {"overall", "categories", "voices"}:
            raise GateError(f"{where}: the keys are 'overall', 'categories' and 'voices', got "
                            f"{sorted(raw) if isinstance(raw, dict) else raw!r}")
        limits = {ALL: _limits(raw.get("overall") or {}, f"{where}: overall")}
        categories = raw.get("categories") or {}
        if not isinstance(categories, dict):
            raise GateError(f"{where}: categories must map a category (or \"*\") to its limits")
        for cat, lim in categories.items():
            limits[str(cat)] = _limits(lim or {}, f"{where}: category {cat!r}")
        voices = raw.get("voices") or {}
        if not isinstance(voices, dict):
            raise GateError(f"{where}: voices must map a voice (or \"*\") to its limits")
        return cls(limits, {str(v).lower(): _limits(lim or {}, f"{where}: voice {v!r}") for v, lim in voices.items()})

    @classmethod
    def max_wer_increase(cls, allowed: float) -> "Gate":
        """The former --max-wer-increase: the overall corpus WER alone."""
        return cls({ALL: {"corpus_wer": float(allowed)}})

    def with_overall_wer(self, allowed: float) -> "Gate":
        """This gate with its overall corpus WER limit set to `allowed` (--max-wer-increase beside --gate)."""
        return Gate({**self.limits, ALL: {**self.limits.get(ALL, {}), **_limits({"corpus_wer": allowed}, "max WER increase")}},
                    self.voice_limits)


def _limits(raw, where: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise GateError(f"{where}: expected measure: allowed worsening, got {raw!r}")
    out = {}
    for name, value in raw.items():
        if name not in MEASURES:
            raise GateError(f"{where}: unknown measure {name!r} (known: {', '.join(MEASURES)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise GateError(f"{where}: {name} must be a number >= 0 (the worsening allowed), got {value!r}")
        out[name] = float(value)
    return out


@dataclass(frozen=True)
class Breach:
    category: str
    measure: str
    delta: float
    low: float
    high: float
    limit: float
    voice: str | None = None  # a voice's breach (its pairs); category is then ALL

    def line(self) -> str:
        m = MEASURES[self.measure]
        where = f"voice {self.voice}" if self.voice else "overall" if self.category == ALL else f"category {self.category}"
        side = {1: "rose", -1: "fell", 0: "changed"}[m.worse]
        return (f"{where}: {self.measure} {side} by {_signed(m, self.delta)} [95% {_signed(m, self.low)}, "
                f"{_signed(m, self.high)}], more than the {fmt(m, self.limit)} allowed")


def _signed(m, v: float) -> str:
    return ("+" if v >= 0 else "-") + fmt(m, abs(v))


def check(gate: Gate, comparison: Comparison) -> list[Breach]:
    """Every limit the comparison breaches; a gate that names what the comparison lacks raises."""
    for cat in gate.limits:
        if cat not in (ALL, "*") and cat not in comparison.categories:
            raise GateError(f"the gate names category {cat!r}, which these runs do not have "
                            f"(they have: {', '.join(comparison.categories) or 'none'})")
    voices = {v.lower(): v for v in comparison.voices}
    for v in gate.voice_limits:
        if v != "*" and v not in voices:
            raise GateError(f"the gate names voice {v!r}, which these runs were not spoken in "
                            f"(they were: {', '.join(comparison.voices) or 'no saved voice'})")
    breaches = []
    for cat, deltas in comparison.deltas.items():
        wanted = dict(gate.limits.get(ALL, {})) if cat == ALL else {**gate.limits.get("*", {}), **gate.limits.get(cat, {})}
        breaches += _breaches(wanted, deltas, Breach(cat, "", 0, 0, 0, 0), required=cat == ALL,
                              absent=comparison.absent)
    for key, voice in voices.items():
        wanted = {**gate.voice_limits.get("*", {}), **gate.voice_limits.get(key, {})}
        breaches += _breaches(wanted, comparison.voice_deltas.get(voice, {}), Breach(ALL, "", 0, 0, 0, 0, voice),
                              required=key in gate.voice_limits)
    return breaches


def _breaches(wanted: dict[str, float], deltas: dict, where: Breach, required: bool,
              absent: dict[str, str] | None = None) -> list[Breach]:
    """The limits in `wanted` these deltas breach (`where`: the group, as a Breach to fill in);
    `required`: a measure the runs lack is the gate's error, not a pass, saying which run lacks it
    (`absent`, Comparison.absent) and what it needs."""
    absent = absent or {}
    out = []
    for name, limit in wanted.items():
        d = deltas.get(name)
        if d is None:
            if required:
                raise GateError(f"the gate limits {name}, which these runs do not measure: "
                                f"{absent.get(name, 'no compared row has it')}. It needs {NEEDS.get(name, NEEDS[''])}")
            continue
        worse = MEASURES[name].worse
        best_case = d.low if worse > 0 else -d.high if worse < 0 else min(abs(d.low), abs(d.high))
        if worse == 0 and d.low <= 0 <= d.high:
            best_case = 0.0
        if best_case > limit:
            out.append(replace(where, measure=name, delta=d.delta, low=d.low, high=d.high, limit=limit))
    return out
