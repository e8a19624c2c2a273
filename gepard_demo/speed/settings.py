"""What the speed layer applies to a loaded engine: one frozen dataclass, chosen once by an
entry point (select.py's `pick_speed`, or a `--precision` override) and passed down."""

from __future__ import annotations

from dataclasses import dataclass

# fp32: the weights as loaded. bf16: the whole talker in bfloat16 (fast only with native bf16
# math: AVX512-BF16/AMX on a CPU, or a GPU). int8: the backbone's linear layers as dynamic int8
# (int8 weights per output channel, activations quantized per step); embeddings, the 32 codebook
# heads, the stop head and the frame embedding stay fp32.
# fp16: the talker in float16, on a GPU only (as `--dtype float16` always was).
PRECISIONS = ("fp32", "bf16", "int8", "fp16")


class SpeedError(ValueError):
    """A speed setting this machine or this model cannot run."""


@dataclass(frozen=True)
class SpeedSettings:
    """device: where the talker runs ("cpu", "cuda", "cuda:1").
    precision: one of PRECISIONS.
    threads: torch intra-op threads for the process (0 = leave torch's own choice).
    pipelined: the talker runs on its own thread, ahead of the codec (a frame then costs the
        slower of the two instead of their sum).
    reason: why this was picked (printed at start-up, shown in the banner).
    """

    device: str = "cpu"
    precision: str = "fp32"
    threads: int = 0
    pipelined: bool = False
    reason: str = ""

    def validate(self) -> "SpeedSettings":
        if self.precision not in PRECISIONS:
            raise SpeedError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.threads < 0:
            raise SpeedError(f"threads must be >= 0, got {self.threads}")
        if self.precision == "int8" and not self.device.startswith("cpu"):
            raise SpeedError("int8 (dynamic quantized linear layers) runs on the CPU only")
        if self.precision == "fp16" and self.device.startswith("cpu"):
            raise SpeedError("fp16 runs on a GPU only (CPUs have no fast float16 math)")
        return self

    def describe(self) -> str:
        """One line: 'cpu · int8 backbone · 2 threads · talker ahead of codec'."""
        parts = [self.device, "int8 backbone" if self.precision == "int8" else self.precision]
        if self.threads:
            parts.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        parts.append("talker ahead of codec" if self.pipelined else "talker then codec")
        return " · ".join(parts)
