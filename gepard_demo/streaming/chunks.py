"""What a streaming session hands out (chunks, step events) and reports (its stats), and what it
hands to the call that goes on with it (`SessionCarry`). Plain values: they cross GPU calls'
process boundary pickled (gepard_demo/zerogpu)."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gepard_demo.model.guards.ending import FORCE_STOP, RUNAWAY_ENDS, STOP, utterance_end

if TYPE_CHECKING:
    import torch

    from gepard_demo.codec.fsq import Codes
    from gepard_demo.units import Json


@dataclass(frozen=True)
class AudioChunk:
    """A piece of the utterance, ready to play.

    samples: float32 mono PCM at sample_rate.
    start_sample / start_s: where the chunk starts in the utterance.
    frame_start, frame_end: the frames [start, end) decoded for this chunk (session-wide
        frame numbering across segments). Because the end fade holds samples back (see
        `SynthesisSession`), the samples may lag the frames by up to fade_ms.
    wall_s: seconds from the request start until these samples were ready.
    final: the last chunk (carries the end fade and silence). When the stop head fires right
        after a chunk boundary and there is no fade or silence, it is empty: an end marker.
    """

    samples: np.ndarray
    sample_rate: int
    start_sample: int
    frame_start: int
    frame_end: int
    wall_s: float
    final: bool = False

    @property
    def start_s(self) -> float:
        return self.start_sample / self.sample_rate

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate


@dataclass(frozen=True)
class StepEvent:
    """One decode step, between the chunks, from `SynthesisSession.events()`.

    frames: frames committed so far (session-wide); p_stop: this step's stop probability;
    wall_s: seconds from the request start; entropy: the probe's belief entropy at this step.
    """

    frames: int
    p_stop: float
    wall_s: float
    entropy: float = float("nan")


@dataclass
class SynthesisStats:
    """What one session did; filled in while it runs, complete once iteration ends.

    frames: frames committed (all segments).
    ended_by: how each segment ended: "stop", "budget", "force_stop" or "cancel" (model/guards/ending.py);
        the one record of how the run ended. `outcome` is the utterance's end; once the session is
        complete, stop_fired (every segment's stop head fired), runaway (some segment hit
        max_frames or was force-stopped) and force_stopped follow from it. segment_frames: how
        many frames each segment has (a take's codes split back into its segments).
    stop_frame: frames committed when the last segment's stop fired (None otherwise).
    p_stop: one value per decode step, including the stop step itself.
    entropy: the probe's belief entropy per decode step (as p_stop); nll: per committed frame
        (gepard_demo/model/guards/probe.py); `probe()` summarises them.
    ttfa_s: request start -> first chunk's samples ready.
    gen_time_s: wall time spent waiting on the engine (prefill + decode steps).
    decode_time_s: wall time spent in the codec and the end-of-speech shaping.
    wall_s: request start -> last chunk ready.
    speech_s: audio of the committed frames; audio_s: what was emitted (speech + silence_ms).
    rtf: wall_s / speech_s (the end silence is free, so it does not flatter the figure).
    seed: the seed actually used (drawn here when the request had none).
    segments: how many pieces long text was split into; cancelled: closed before the end.
    speed: the engine's speed path (device, precision, threads, pipeline), when one was picked.
    gpu_asks_s: behind ZeroGPU, the seconds each GPU call of the utterance asked for (zerogpu/budget.py).
    text_waits_s: text written word by word (streaming/text_feed.py): each sentence's wait from
        its last word written to its first audio out, in order.
    """

    text: str = ""
    seed: int | None = None
    frames: int = 0
    stop_frame: int | None = None
    ended_by: list[str] = field(default_factory=list)
    segment_frames: list[int] = field(default_factory=list)  # frames of each segment that ended
    segment_pauses: list[int] = field(default_factory=list)  # silence after each (a <break>: breaks.py), samples
    p_stop: list[float] = field(default_factory=list)
    entropy: list[float] = field(default_factory=list)
    nll: list[float] = field(default_factory=list)
    ttfa_s: float | None = None
    gen_time_s: float = 0.0
    decode_time_s: float = 0.0
    wall_s: float = 0.0
    speech_s: float = 0.0
    audio_s: float = 0.0
    rtf: float | None = None
    chunks: int = 0
    segments: int = 1
    cancelled: bool = False
    complete: bool = False
    speed: str | None = None
    gpu_asks_s: list[int] = field(default_factory=list)  # on ZeroGPU: what each of its calls asked for
    text_waits_s: list[float] = field(default_factory=list)  # text written as it comes: each sentence's wait
    speaker_sim: float | None = None  # spoken in a reference voice: the page's GE2E cosine of it and the output

    def as_dict(self) -> dict[str, Json]:
        d = dict(self.__dict__)
        for name in _LISTS:
            d[name] = list(d[name])
        d.update(stop_fired=self.stop_fired, runaway=self.runaway, force_stopped=self.force_stopped)
        d.update(self.probe())
        return d

    @property
    def outcome(self) -> str:
        """How the utterance ended (ending.utterance_end): "cancel", "force_stop", "budget" or "stop"."""
        return utterance_end(self.ended_by, self.cancelled)

    @property
    def stop_fired(self) -> bool:
        return self.complete and bool(self.ended_by) and self.outcome == STOP

    @property
    def runaway(self) -> bool:
        return self.complete and self.outcome in RUNAWAY_ENDS

    @property
    def force_stopped(self) -> bool:
        return self.complete and self.outcome == FORCE_STOP

    def probe(self) -> dict[str, float | None]:
        """The onset-entropy summary: mean entropy over frames 0-9 and 40-59 and the drop."""
        from gepard_demo.model.guards.probe import summary

        return summary(self.entropy)

    def copy(self) -> "SynthesisStats":
        """A copy whose lists are its own (what a carry hands the next call)."""
        out = copy.copy(self)
        for name in _LISTS:
            setattr(out, name, list(getattr(self, name)))
        return out


_LISTS = ("p_stop", "entropy", "nll", "ended_by", "segment_frames", "segment_pauses", "gpu_asks_s", "text_waits_s")


def segment_spans(segment_frames: list[int], segment_pauses: list[int], samples_per_frame: int) -> list[tuple[int, int]]:
    """Each ended segment's (first, end) sample of speech in the utterance's audio: its frames'
    samples, after the earlier segments' and the silences of their breaks (breaks.py)."""
    spans, start = [], 0
    for k, frames in enumerate(segment_frames):
        end = start + frames * samples_per_frame
        spans.append((start, end))
        start = end + (segment_pauses[k] if k < len(segment_pauses) else 0)
    return spans


def stack_codes(codes: Sequence[Codes]) -> torch.Tensor | np.ndarray:
    """FrameStep codes are (32,) tensors (or arrays): stack them into one (n, 32) block."""
    import torch

    if isinstance(codes[0], torch.Tensor):  # keep the codec's native type
        return torch.stack([torch.as_tensor(c) for c in codes])
    return np.stack([np.asarray(c) for c in codes])
