"""Pick the fastest talker path that passes the fidelity guard on the hardware found.

What passes and what is fast was measured by benchmarks/cpu_realtime.py on the real-shape
random model (see README "Real time on CPU", and GUARD_PASSES below): fbgemm's fp16-weight and
int8 backbone linears are the fast CPU paths on AVX2 and AVX-512 machines alike; auto takes the
fastest one that passed the guard. bf16 passes too but is only fast with native bf16 math
(AVX512-BF16 / AMX), so it is used only when asked for. With 2+ cores the talker runs ahead of
the codec on its own thread. A GPU computes the backbone in bf16 from compute capability 8.0
and in fp16 below it (a T4), never quantized, never pipelined; everywhere the embeddings, the
32 heads, the stop head and the frame embedding stay fp32.

    hw = detect_hardware("cpu")
    speed = pick_speed(hw, precision="auto", threads=0, small_model=False)
    engine = apply_speed(engine, speed)     # quantized talker, pipelined stream_frames
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .pipeline import PipelinedEngine
from .quantize import apply_precision, quantized_kernels_available
from .settings import CPU_ONLY, PRECISIONS, SpeedError, SpeedSettings

if TYPE_CHECKING:
    from gepard_demo.codec.base import Codec
    from gepard_demo.settings import StreamSettings
    from gepard_demo.model.engine import GepardEngine
    from gepard_demo.model.seams import Engine

# CPU paths from fastest to slowest on batch-1 decode (benchmarks/cpu_realtime.py, section 3),
# and whether each passed the fidelity guard on the real-shape random model (section 2: 500
# teacher-forced steps, mean per-head KL <= 0.01 nats, max |dp_stop| <= 0.01).
CPU_FASTEST_FIRST = ("int8", "fp16w")
# bf16 layers miss it narrowly: max |dp_stop| 0.011 with the heads fp32 (0.017 when the heads were
# bf16 too), so a CPU never picks it on its own. A GPU runs bf16 layers (fp16 below compute
# capability 8.0), as vLLM-Omni deploys Gepard; benchmarks/gpu_smoke.py reports the guard on the
# GPU itself: on an H200 (2026-12-04) bf16 layers missed it too, max |dp_stop| 0.0122
# (docs/PERFORMANCE.md §7). fp16 on a GPU has not been measured.
GUARD_PASSES = {"fp32": True, "fp16w": True, "int8": False, "bf16": False, "fp16": True}
GUARD_NOTE = "cpu_realtime.py, real-shape random model, 500 steps"
# The codec's bf16 autocast against the 40 dB SNR guard (fidelity.MIN_CODEC_SNR_DB), full-size
# random NanoCodec, exact streaming in 10-frame pushes: 42.2 dB, 1.5x faster on one thread of an
# AVX-512/AMX Xeon (issue 34); it is only fast with native bf16 math (50x slower on AVX2 alone).
CODEC_GUARD_PASSES = {"fp32": True, "bf16": True}

CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


# bf16 needs tensor-core bf16 math: compute capability 8.0 (Ampere) and above. A T4 (7.5) only
# emulates it, yet torch.cuda.is_bf16_supported() says True there; vLLM refuses bf16 below 8.0.
BF16_MIN_CAPABILITY = (8, 0)


@dataclass(frozen=True)
class Hardware:
    device: str  # "cpu" or "cuda[:n]"
    cores: int  # CPUs this process may use
    cpu_flags: tuple[str, ...]  # the CPU_FLAGS present
    int8_kernels: bool  # PyTorch has the x86/fbgemm quantized engine (int8 and fp16-weight linears)
    capability: tuple[int, int] | None = None  # a GPU's compute capability
    gpu_name: str | None = None

    @property
    def native_bf16(self) -> bool:
        if self.device.startswith("cuda"):
            return self.capability is not None and tuple(self.capability) >= BF16_MIN_CAPABILITY
        return any(f in self.cpu_flags for f in ("avx512_bf16", "amx_bf16"))

    def describe(self) -> str:
        if self.device.startswith("cuda"):
            cap = ".".join(map(str, self.capability)) if self.capability else "?"
            return f"{self.device} ({self.gpu_name}, compute capability {cap})"
        flags = ", ".join(self.cpu_flags) or "no AVX2"
        return f"cpu, {self.cores} cores ({flags})"


def _cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, ...]:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("flags"):
                present = set(line.split(":", 1)[1].split())
                return tuple(f for f in CPU_FLAGS if f in present)
    except OSError:
        pass
    # No /proc/cpuinfo (macOS, Windows): what PyTorch's own dispatcher detected.
    cap = torch.backends.cpu.get_cpu_capability().lower()
    return ("avx2", "avx512f") if cap == "avx512" else ("avx2",) if cap == "avx2" else ()


def detect_hardware(device: str = "cpu") -> Hardware:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    capability = name = None
    if device.startswith("cuda"):
        # Both answer without initialising CUDA under ZeroGPU's emulation (spaces patches them).
        capability = torch.cuda.get_device_capability(device)
        name = torch.cuda.get_device_name(device)
    return Hardware(device=device, cores=cores, cpu_flags=_cpu_flags(), int8_kernels=quantized_kernels_available(),
                    capability=capability, gpu_name=name)


def gpu_precision(capability: tuple[int, int]) -> str:
    """bf16 where the GPU computes it natively, fp16 below (a T4's precision)."""
    return "bf16" if tuple(capability) >= BF16_MIN_CAPABILITY else "fp16"


def precision_for(device: str, precision: str = "auto") -> str:
    """`precision` checked against `device` before any weight loads, "auto" resolved for a GPU
    (a CPU's auto is pick_speed's, after loading). Raises SpeedError with what to use instead."""
    if precision != "auto" and precision not in PRECISIONS:
        raise SpeedError(f"precision must be 'auto' or one of {PRECISIONS}, got {precision!r}")
    if not device.startswith("cuda"):
        if precision == "fp16":
            raise SpeedError("precision fp16 runs on a GPU only (CPUs have no fast float16 math): use fp16w on a CPU")
        return precision
    if not torch.cuda.is_available():
        raise SpeedError(f"--device {device}, but this PyTorch cannot use a GPU here (torch {torch.__version__}, "
                         f"CUDA build {torch.version.cuda}); the start-up line says why")
    if precision in CPU_ONLY:
        raise SpeedError(f"precision {precision} is CPU-only (fbgemm linears); on {device} use auto, bf16, fp16 or fp32")
    capability = torch.cuda.get_device_capability(device)
    if precision == "auto":
        return gpu_precision(capability)
    if precision == "bf16" and capability < BF16_MIN_CAPABILITY:
        raise SpeedError(f"bf16 needs compute capability 8.0 or above; this GPU is {capability[0]}.{capability[1]}, where "
                         "bf16 is only emulated (no tensor cores, math-kernel attention): use fp16 (auto picks it) or fp32")
    return precision


def pick_speed(hw: Hardware, precision: str = "auto", threads: int = 0, small_model: bool = False,
               codec: str = "auto") -> SpeedSettings:
    """The fastest passing path for `hw`; `precision`, `codec` (not "auto") and `threads` (> 0) override.

    small_model: the tiny random checkpoint, where a step is all per-op overhead: fp32 on one
    thread, no pipeline (facts §8: one thread is fastest and steadiest there).
    """
    if precision != "auto" and precision not in PRECISIONS:
        raise SpeedError(f"precision must be 'auto' or one of {PRECISIONS}, got {precision!r}")
    if hw.device.startswith("cuda"):
        if precision in CPU_ONLY:
            raise SpeedError(f"precision {precision} is CPU-only; on {hw.device} use bf16, fp16 or fp32")
        if precision == "auto":
            chosen = gpu_precision(hw.capability or (0, 0))
            reason = (f"GPU of compute capability {'.'.join(map(str, hw.capability or (0, 0)))}: "
                      + ("bf16, as vLLM-Omni deploys it" if chosen == "bf16" else "fp16 (bf16 is only emulated below 8.0)"))
        else:
            chosen, reason = precision, "asked for"
        return SpeedSettings(hw.device, chosen, threads, False, reason + "; heads and embeddings fp32")
    if small_model:
        chosen = "fp32" if precision == "auto" else precision
        return SpeedSettings("cpu", chosen, threads or 1, False, "tiny model: one fp32 thread is fastest" if precision == "auto" else "asked for",
                             "fp32" if codec == "auto" else codec)
    if precision == "auto":
        passing = [p for p in CPU_FASTEST_FIRST if GUARD_PASSES[p]]
        if hw.int8_kernels and passing:
            chosen, reason = passing[0], f"fastest CPU path that passes the fidelity guard ({GUARD_NOTE})"
        else:
            chosen, reason = "fp32", "no fbgemm kernels in this PyTorch build"
    else:
        chosen, reason = precision, "asked for"
        if not GUARD_PASSES.get(chosen, True):
            reason += f"; it misses the fidelity guard on the real-shape model ({GUARD_NOTE})"
    if chosen in CPU_ONLY and not hw.int8_kernels:
        raise SpeedError(f"precision {chosen} needs PyTorch's x86/fbgemm quantized engine, which this build lacks")
    if chosen == "bf16" and not hw.native_bf16:
        reason += " (this CPU has no native bf16 math: expect it slower than fp32)"
    pipelined = hw.cores >= 2
    # torch's thread count is one per process: with the pipeline each stage gets half the cores
    # (measured on 2 cores: 1+1 beats 2+2, which oversubscribes and spins).
    n = threads or (max(1, hw.cores // 2) if pipelined else hw.cores)
    codec_choice = codec
    if codec == "auto":
        codec_choice = "bf16" if hw.native_bf16 and CODEC_GUARD_PASSES["bf16"] else "fp32"
        if codec_choice == "bf16":
            reason += "; codec in bf16 autocast (native bf16 math here, 42 dB against fp32)"
    elif codec == "bf16" and not hw.native_bf16:
        reason += " (a bf16 codec on a CPU without native bf16 math: expect it much slower)"
    return SpeedSettings("cpu", chosen, n, pipelined, reason, codec_choice)


LOAD_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "int8": "float32", "fp16w": "float32"}


def load_dtype(device: str, precision: str) -> str:
    """The dtype the backbone's layers are loaded in, checked against the device first
    (precision_for). A GPU loads at its precision directly (auto: bf16 from compute capability
    8.0, fp16 below); a CPU always loads fp32 and `apply_speed` converts or quantizes it."""
    chosen = precision_for(device, precision)
    if device.startswith("cuda"):
        return LOAD_DTYPES[chosen]
    return "float32"


def apply_codec_speed(codec: Codec, speed: SpeedSettings, stream: StreamSettings | None = None) -> Codec:
    """The codec with `speed.codec` applied (a NativeCodec's decoder; a NeMo one stays as it is),
    and its chunks as CUDA graphs where the talker's step is (the one `cuda_graphs` setting: its
    streams over fixed buffers, codec/graphed.py), captured now for `stream`'s chunk sizes."""
    from gepard_demo.model.fixed_shape.choice import choose_loop
    from gepard_demo.streaming.pacing import decode_sizes

    codec.use_cpu_bf16(speed.codec == "bf16")
    loop = choose_loop(speed.cuda_graphs, speed.device, full_attention=True)  # no recurrent layers in a codec
    codec.use_chunk_graphs(loop.fixed, loop.required)
    if loop.graphs and stream is not None:
        captures = codec.warm_chunk_graphs(decode_sizes(stream))
        print("codec chunks: " + "; ".join(c.describe() for c in captures), file=sys.stderr, flush=True)
    return codec


def apply_speed(engine: GepardEngine, speed: SpeedSettings, warm: bool = True) -> Engine:
    """The engine with `speed` applied: talker precision (CPU only; a GPU engine's dtype was
    chosen at load), the process's torch threads, the pipeline, the decode loop (its CUDA graphs
    captured now for WARM_ROWS unless `warm` is False: a ZeroGPU main process, whose CUDA belongs to
    the GPU calls), and the pick in model_info."""
    if speed.threads:
        torch.set_num_threads(speed.threads)
    if speed.device.startswith("cpu") and speed.precision != "fp32":
        loaded = engine.model_info.dtype
        if loaded != "float32":
            raise SpeedError(f"precision {speed.precision} applies to an fp32 engine; this one was loaded as {loaded}")
        apply_precision(engine.talker, speed.precision)
    info = dataclasses.replace(engine.model_info, speed=speed.describe())
    if speed.device.startswith("cpu") and speed.precision == "bf16":
        info = dataclasses.replace(info, dtype="bfloat16")
    engine.model_info = info
    loop = engine.use_loop(speed.cuda_graphs)
    captures = engine.warm() if warm else []
    print(loop.describe() + "".join(f"; captured {c.describe()}" for c in captures), file=sys.stderr, flush=True)
    return PipelinedEngine(engine) if speed.pipelined else engine
