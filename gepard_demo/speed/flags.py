"""The speed flags every entry point shares (`synth`, `serve`, app.py), and the one function that
turns them plus the loaded engine into SpeedSettings, printed at start-up."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import TYPE_CHECKING

from gepard_demo.model.fixed_shape.choice import CUDA_GRAPHS

from .settings import CODEC_PRECISIONS, PRECISIONS, SpeedSettings

if TYPE_CHECKING:
    from gepard_demo.model.seams import Engine

# Below this hidden size the model is the tiny test checkpoint: per-op overhead, not weights.
SMALL_HIDDEN = 512


DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _dtype_alias(value: str) -> str:
    if value not in DTYPE_ALIASES:
        raise argparse.ArgumentTypeError(f"invalid choice: {value!r} (choose from {', '.join(DTYPE_ALIASES)})")
    return DTYPE_ALIASES[value]


def add_speed_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("speed (default: the fastest path that passes the fidelity guard here)")
    g.add_argument("--precision", choices=("auto", *PRECISIONS), default="auto",
                   help="talker weights. auto: fp16w on a CPU (fp16 weights, fp32 math in the backbone's "
                        "linears), bf16 on a GPU, fp32 for the tiny model. int8: int8 q/k/v/gate/up + fp16w "
                        "o/down (CPU; misses the fidelity guard: max |dp_stop| 0.040 against 0.01). fp16: GPU only")
    # The older flag, kept so existing commands (docs/DEPLOY.md) still work: it sets --precision.
    g.add_argument("--dtype", dest="precision", type=_dtype_alias, default=argparse.SUPPRESS,
                   metavar="{float32,bfloat16,float16}",
                   help="same as --precision fp32 | bf16 | fp16 (float32, bfloat16, float16)")
    g.add_argument("--threads", type=int, default=0,
                   help="torch threads (0 = auto: 1 for the tiny model; half the cores when pipelined, else all)")
    g.add_argument("--pipeline", choices=("auto", "on", "off"), default="auto",
                   help="run the talker on its own thread ahead of the codec (auto: on with 2+ cores, full-size model)")
    g.add_argument("--cuda-graphs", choices=CUDA_GRAPHS, default="auto",
                   help="the decode step: auto = one CUDA graph replay per frame on a GPU (fixed shapes), the "
                        "growing cache on a CPU; on = the fixed-shape step everywhere (graphs required on a GPU); "
                        "off = the growing cache. The codec's chunks follow it: one graph per chunk size")
    g.add_argument("--codec-precision", choices=("auto", *CODEC_PRECISIONS), default="auto",
                   help="the codec's convolutions: auto = bf16 autocast on a CPU with native bf16 math (AVX512-BF16 "
                        "or AMX: 1.5x, 42 dB against fp32), else fp32")


def speed_for(engine: Engine, device: str, precision: str = "auto", threads: int = 0, pipeline: str = "auto",
              codec: str = "auto", cuda_graphs: str = "auto") -> SpeedSettings:
    from .select import detect_hardware, pick_speed

    hw = detect_hardware(device)
    small = engine.config.hidden_size < SMALL_HIDDEN
    speed = pick_speed(hw, precision, threads, small_model=small, codec=codec)
    if pipeline != "auto":
        speed = dataclasses.replace(speed, pipelined=pipeline == "on")
    speed = dataclasses.replace(speed, cuda_graphs=cuda_graphs)
    print(f"speed: {speed.describe()} ({speed.reason}); hardware: {hw.describe()}", file=sys.stderr, flush=True)
    return speed
