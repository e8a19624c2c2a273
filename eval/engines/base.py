"""What eval needs from a TTS engine: `SpeechEngine.synthesize(items, sampling, stream)` turns a
batch of `SynthesisItem`s (eval/engines/request.py: text, seed, voice, id) into `Synthesis` results;
`EvalEngine` is the base each engine subclasses, and each engine's module ends with a line that
has the type checker hold it to `SpeechEngine`. The engines live beside this file (local.py,
piper.py, served.py, files.py; the Eval tab's in eval/ui/common.py); `eval.engines.load_engine`
picks one by name.

Timing definitions (seconds, wall clock, on whatever else the machine is doing):
- gen_s: the row's generation time; in a batch it runs from the batch start until this row
  finished, so batch neighbours share it.
- decode_s: the codec's whole decode of the row plus end-of-speech shaping.
- ttfa_s (Gepard): when a streaming client would have had the first chunk =
  first_frame_s + (k - 1) x the row's mean step time (k = first_chunk_frames, capped by the
  row's frames: the first chunk's last frame, estimated from the row's steady step rate)
  + the measured decode time of those k frames alone through the codec streamer
  (StreamSettings.decode_mode / lookback). On a batch it includes the neighbours' cost.
- ttfa_s (local-stream): SynthesisStats.ttfa_s, request start -> first chunk's samples ready.
- ttfa_s (server): request sent -> first audio bytes received (network and queueing included).
  gen_s is the whole request; decode_s is 0 (the server decodes inside gen_s). eval/engines/served.py.
- ttfa_s (Piper): time until Piper yields its first audio chunk (its first sentence).
- rtf = (gen_s + decode_s) / duration_s.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from gepard_demo.model.guards.ending import Ended
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.units import wire_trace

from eval.engines.request import SynthesisItem

if TYPE_CHECKING:
    from gepard_demo.model.seams import Engine
    from gepard_demo.streaming.seams import TurnLock


class EngineError(RuntimeError):
    """An engine cannot synthesize as asked (a dead or refusing server, an unreadable reference);
    the message says why and what to do. The CLI exits 2 on it, as on a RunError."""


@dataclass
class Synthesis(Ended):
    audio: np.ndarray  # float32 mono
    sample_rate: int
    frames: int | None
    stop_frame: int | None
    p_stop: list[float] | None
    seed: int | None
    gen_s: float
    decode_s: float
    ttfa_s: float
    codes: np.ndarray | None = None  # (frames, 32) codec codes, where the engine has them (the loop detector's)
    text_tokens: int | None = None  # the text's token count (before repetition), where the engine tokenizes
    error: str | None = None  # a served request the server failed (5xx): no audio, the row says why
    # How the utterance ended and the onset-entropy probe (gepard_demo/model/guards/probe.py), where the
    # engine has them (local, local-stream, our server; None for vLLM-Omni, Piper, files):
    # "stop", "budget" or "force_stop" (gepard_demo/model/guards/ending.py): stop_fired, runaway and
    # force_stopped follow from it; None (Piper, files) leaves them None too.
    ended_by: str | None = None
    force_stop: int | None = None  # the frame count it would be force-stopped at ("auto" resolved), None: off
    # None in a trace: a step a server could not report.
    entropy: Sequence[float | None] | None = None  # belief entropy per decode step (the stop step included), nats
    nll: Sequence[float | None] | None = None  # the committed frame's NLL per frame, nats

    @property
    def duration_s(self) -> float:
        return len(self.audio) / self.sample_rate

    @property
    def rtf(self) -> float:
        return (self.gen_s + self.decode_s) / max(self.duration_s, 1e-9)

    def probe_fields(self) -> dict:
        """The row's onset-entropy probe (gepard_demo/model/guards/probe.py): the traces rounded to 4
        decimals (entropy per decode step, the stop step included; NLL per committed frame) and
        their summary (mean entropy over frames 0-9 and 40-59, and the drop); None without them."""
        out: dict[str, object] = {"entropy": wire_trace(self.entropy), "nll": wire_trace(self.nll), "entropy_onset": None,
               "entropy_settled": None, "entropy_drop": None}
        if self.entropy:
            from gepard_demo.model.guards.probe import summary

            out.update(summary([float("nan") if h is None else h for h in self.entropy]))
        return out


class SpeechEngine(Protocol):
    """What a run, a sweep and the Eval tab ask of an engine: every eval engine takes the same
    items whole (eval/engines/request.py) and refuses, naming the field, what it cannot honour."""

    name: str

    def describe(self) -> dict:
        """The engine's identity for the run's environment.json (model, revision, device...)."""
        ...

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        """One batch, in order."""
        ...

    def synthesize_each(self, items: list[SynthesisItem], sampling: SamplingSettings, stream: StreamSettings,
                        batch_size: int = 4) -> Iterator[tuple[int, Synthesis]]:
        """(index, Synthesis) of each item as it ends, in any order."""
        ...

    def gepard(self) -> Engine | None:
        """The GepardEngine behind this engine (its tokenizer and prompt, for checks that read
        them), or None where there is none here (a server, Piper, files)."""
        ...

    def trace_source(self) -> tuple[SpeechEngine, TurnLock | None] | None:
        """(a GepardLocal, lock or None) a one-pass threshold sweep regenerates its sources on
        (eval/sweeps/thresholds.py), or None: every sweep point is then run on its own."""
        ...


class EvalEngine:
    """The base of eval's engines (`SpeechEngine`'s surface). A subclass gives `name`, `describe`
    and `synthesize`; the rest have defaults that a subclass overrides where it does better."""

    name: str

    def describe(self) -> dict:
        raise NotImplementedError

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        raise NotImplementedError

    def synthesize_each(self, items: list[SynthesisItem], sampling: SamplingSettings, stream: StreamSettings,
                        batch_size: int = 4) -> Iterator[tuple[int, Synthesis]]:
        """Here: batches of batch_size, in order."""
        for start in range(0, len(items), batch_size):
            for j, s in enumerate(self.synthesize(items[start : start + batch_size], sampling, stream)):
                yield start + j, s

    def gepard(self) -> Engine | None:
        return None

    def trace_source(self) -> tuple[SpeechEngine, TurnLock | None] | None:
        return None


def refuse_refs(items: list[SynthesisItem], engine: str) -> None:
    """An EngineError naming `SynthesisItem.ref` when an item asks for a voice `engine` cannot clone."""
    asked = next((item for item in items if item.ref is not None), None)
    if asked is not None:
        raise EngineError(f"SynthesisItem.ref: --engine {engine} cannot speak in a reference voice ({asked.ref!r}, "
                          f"asked for {asked.uid or asked.text[:40]!r}); local, local-stream and server can")


if TYPE_CHECKING:
    _EvalEngine_is_a_SpeechEngine: type[SpeechEngine] = EvalEngine
