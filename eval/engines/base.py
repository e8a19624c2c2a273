"""What eval needs from a TTS engine: `EvalEngine.synthesize(requests, sampling, stream)` turns a
batch of (text, seed) into `Synthesis` results; `EvalEngine` is the base each engine subclasses. The engines live
beside this file (local.py, piper.py, served.py, files.py); `eval.engines.load_engine` picks one by name.

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
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from gepard_demo.model.guards.ending import Ended
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.units import wire_trace

if TYPE_CHECKING:
    import torch

    from gepard_demo.model.seams import Engine
    from gepard_demo.streaming.seams import TurnLock


@dataclass(frozen=True)
class VoiceRef:
    """A saved voice (gepard_demo/voice/library.py) as a request's reference: its name, and the
    folder read here for its prefix (local engines) and its clip (speaker similarity). A server is
    sent the name and speaks in its own saved voice of that name."""

    name: str
    folder: str | None

    def _library(self):
        from gepard_demo.voice.library import VoiceLibrary, VoiceError

        if self.folder is None:
            raise VoiceError(f"voice {self.name!r}: no --voices-dir to read it from", "voice")
        return VoiceLibrary(self.folder)

    def prefix(self) -> torch.Tensor:
        return self._library().prefix(self.name)

    def clip(self) -> np.ndarray:
        """Its trimmed clip, mono float32 at 22.05 kHz."""
        return self._library().clip(self.name)


# A request's reference voice: a recording's path, or a saved voice.
Reference = str | VoiceRef


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
    entropy: list[float] | None = None  # belief entropy per decode step (the stop step included), nats
    nll: list[float] | None = None  # the committed frame's NLL per frame, nats

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
        out = {"entropy": wire_trace(self.entropy), "nll": wire_trace(self.nll), "entropy_onset": None,
               "entropy_settled": None, "entropy_drop": None}
        if self.entropy:
            from gepard_demo.model.guards.probe import summary

            out.update(summary([float("nan") if h is None else h for h in self.entropy]))
        return out


class EvalEngine:
    """What a run and a sweep ask of an engine. A subclass gives `name`, `describe` and
    `synthesize`; the rest have defaults that a subclass overrides where it does better."""

    name: str

    def describe(self) -> dict:
        """The engine's identity for the run's environment.json (model, revision, device...)."""
        raise NotImplementedError

    def synthesize(self, requests: list[tuple[str, int]], sampling: SamplingSettings, stream: StreamSettings,
                   refs: list[Reference | None] | None = None) -> list[Synthesis]:
        """One batch of (text, seed), in order. refs: per request, a reference recording or saved
        voice to speak it in (None: the default voice); an engine without cloning is never passed it."""
        raise NotImplementedError

    def synthesize_each(self, requests: list[tuple[str, int]], sampling: SamplingSettings, stream: StreamSettings,
                        refs: list[Reference | None] | None = None, batch_size: int = 4,
                        ids: list[str] | None = None) -> Iterator[tuple[int, Synthesis]]:
        """(index, Synthesis) of each request as it ends, in any order; ids: the utterances' ids
        (engines that look audio up by id use them). Here: batches of batch_size, in order."""
        for start in range(0, len(requests), batch_size):
            part = refs[start : start + batch_size] if refs else None
            voice = {"refs": part} if part and any(part) else {}
            results = self.synthesize(requests[start : start + batch_size], sampling, stream, **voice)
            for j, s in enumerate(results):
                yield start + j, s

    def gepard(self) -> Engine | None:
        """The GepardEngine behind this engine (its tokenizer and prompt, for checks that read
        them), or None where there is none here (a server, Piper, files)."""
        return None

    def trace_source(self) -> tuple[EvalEngine, TurnLock | None] | None:
        """(a GepardLocal, lock or None) a one-pass threshold sweep regenerates its sources on
        (eval/sweeps/thresholds.py), or None: every sweep point is then run on its own."""
        return None
