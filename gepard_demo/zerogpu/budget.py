"""How long each GPU call asks ZeroGPU for, from its request.

A call asks for a duration up front (`@spaces.GPU(duration=...)`, 60 s by default); one that runs
past it may be aborted, and a longer request waits longer in ZeroGPU's queue, so each call asks
for what its own request can take at most: its frame budget (every text segment can use all of
max_frames), the rows a step runs (a guided frame is two), the codec's decode, and a fixed
start-up share (a fresh worker moves the weights to the GPU and sets up its kernels). A call that
would need more than `max_s` is refused before it is scheduled, with what to lower.

The per-frame figures are deliberately above what one H200 slice should need (eager PyTorch,
batch 1: about 10-20 ms a step; `benchmarks/gpu_smoke.py` measures them): a call that ends early
gives the rest of its duration back.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gepard_demo.settings import SettingsError
from gepard_demo.streaming.text_input import split_text


@dataclass(frozen=True)
class GpuBudget:
    step_s: float = 0.030  # one decode step of one conditional row
    guided_step_extra: float = 0.3  # a step with its guidance row costs this much more
    codec_s_per_frame: float = 0.004  # exact streaming decode, per frame
    start_s: float = 10.0  # worker start, weights to the GPU, first-call kernel set-up
    encoder_s_per_audio_s: float = 0.3  # a reference voice through the codec encoder + compressor
    max_s: float = 240.0  # the most one call may ask for (ZeroGPU's quota is minutes a day)

    def frames_s(self, frames: int, guided_frames: int = 0) -> float:
        return frames * (self.step_s + self.codec_s_per_frame) + guided_frames * self.step_s * self.guided_step_extra

    def stream_s(self, text: str, max_frames: int, cfg_frames: int | None, guided: bool) -> float:
        """One utterance: every segment of `text` may use all of `max_frames`."""
        frames = len(split_text(text)) * max_frames
        guided_frames = 0 if not guided else frames if cfg_frames is None else min(frames, cfg_frames)
        return self._checked(self.start_s + self.frames_s(frames, guided_frames),
                             f"{frames} frames ({max_frames} per segment)", "max_frames")

    def prefix_s(self, seconds: float) -> float:
        return self._checked(self.start_s + self.encoder_s_per_audio_s * seconds, f"{seconds:.0f} s of reference",
                             "the reference")

    def batch_s(self, rows: int, max_frames: int, guided_rows: int = 0) -> float:
        """An eval batch: rows decode together, so a step costs more than one row's; an H200
        runs a batch of 16 in about twice a solo step (memory-bound below that)."""
        rows_factor = 1.0 + math.log2(max(1, rows + guided_rows)) / 4
        return self._checked(self.start_s + max_frames * (self.step_s * rows_factor + self.codec_s_per_frame * rows),
                             f"{rows} rows x {max_frames} frames", "batch size or max_frames")

    def _checked(self, seconds: float, what: str, lower: str) -> float:
        if seconds > self.max_s:
            raise SettingsError(f"{what} would hold the GPU for up to {seconds:.0f} s, above the {self.max_s:.0f} s "
                                f"one ZeroGPU call may ask for: lower {lower}")
        return math.ceil(seconds)
