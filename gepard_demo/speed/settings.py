"""What the speed layer applies to a loaded engine: one frozen dataclass, chosen once by an
entry point (select.py's `pick_speed`, or a `--precision` override) and passed down."""

from __future__ import annotations

from dataclasses import dataclass

from gepard_demo.model.fixed_shape.choice import CUDA_GRAPHS

# fp32: the weights as loaded. bf16: the whole talker in bfloat16 (fast only with native bf16
# math: AVX512-BF16/AMX on a CPU, or a GPU). fp16w: the backbone's linear layers hold float16
# weights and compute in fp32 (fbgemm). int8: the linears whose input is RMS-normalised (q, k, v,
# gate, up) as dynamic int8, o_proj and down_proj (heavy-tailed inputs) as fp16w. In every CPU
# variant the embeddings, the 32 codebook heads, the stop head and the frame embedding stay fp32.
# fp16: the talker in float16, on a GPU only.
PRECISIONS = ("fp32", "bf16", "fp16w", "int8", "fp16")
CPU_ONLY = ("fp16w", "int8")
# The codec: fp32, or (CPU only) its convolutions under bf16 autocast where the CPU has native bf16.
CODEC_PRECISIONS = ("fp32", "bf16")


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
    codec: the codec's precision, one of CODEC_PRECISIONS (codec/hifigan.py's cpu_bf16).
    cuda_graphs: the decode loop, one of CUDA_GRAPHS (model/fixed_shape/choice.py): auto = the fixed-shape
        step as CUDA graphs on a GPU, the growing cache on a CPU; on; off.
    """

    device: str = "cpu"
    precision: str = "fp32"
    threads: int = 0
    pipelined: bool = False
    reason: str = ""
    codec: str = "fp32"
    cuda_graphs: str = "auto"

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "SpeedSettings":
        if self.precision not in PRECISIONS:
            raise SpeedError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.threads < 0:
            raise SpeedError(f"threads must be >= 0, got {self.threads}")
        if self.precision in CPU_ONLY and not self.device.startswith("cpu"):
            raise SpeedError(f"{self.precision} (fbgemm quantized linear layers) runs on the CPU only")
        if self.precision == "fp16" and self.device.startswith("cpu"):
            raise SpeedError("fp16 runs on a GPU only (CPUs have no fast float16 math)")
        if self.codec not in CODEC_PRECISIONS:
            raise SpeedError(f"codec precision must be one of {CODEC_PRECISIONS}, got {self.codec!r}")
        if self.cuda_graphs not in CUDA_GRAPHS:
            raise SpeedError(f"cuda_graphs must be one of {CUDA_GRAPHS}, got {self.cuda_graphs!r}")
        if self.codec == "bf16" and not self.device.startswith("cpu"):
            raise SpeedError("a bf16 codec is a CPU path; on a GPU the codec decodes in fp32 (exact streaming)")
        return self

    def describe(self) -> str:
        """One line: 'cpu · int8 backbone · 2 threads · talker ahead of codec'."""
        label = {"int8": "int8+fp16 backbone", "fp16w": "fp16-weight backbone"}.get(self.precision, self.precision)
        parts = [self.device, label]
        if self.threads:
            parts.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        parts.append("talker ahead of codec" if self.pipelined else "talker then codec")
        if self.codec != "fp32":
            parts.append(f"{self.codec} codec")
        if self.cuda_graphs != "auto":
            parts.append(f"cuda graphs {self.cuda_graphs}")
        return " · ".join(parts)
