"""The speed flags every entry point shares (`synth`, `serve`, app.py), and the one function that
turns them plus the loaded engine into SpeedSettings, printed at start-up."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from .settings import PRECISIONS, SpeedSettings

# Below this hidden size the model is the tiny test checkpoint: per-op overhead, not weights.
SMALL_HIDDEN = 512


def add_speed_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("speed (default: the fastest path that passes the fidelity guard here)")
    g.add_argument("--precision", choices=("auto", *PRECISIONS), default="auto",
                   help="talker weights: int8 = dynamic int8 backbone linears (CPU), bf16, fp16 (GPU), fp32")
    g.add_argument("--threads", type=int, default=0, help="torch threads (0 = auto: 1 for the tiny model, all cores otherwise)")
    g.add_argument("--pipeline", choices=("auto", "on", "off"), default="auto",
                   help="run the talker on its own thread ahead of the codec (auto: on with 2+ threads)")


def speed_for(engine: Any, device: str, precision: str = "auto", threads: int = 0, pipeline: str = "auto") -> SpeedSettings:
    from .select import detect_hardware, pick_speed

    hw = detect_hardware(device)
    small = engine.config.hidden_size < SMALL_HIDDEN
    speed = pick_speed(hw, precision, threads, small_model=small)
    if pipeline != "auto":
        speed = dataclasses.replace(speed, pipelined=pipeline == "on")
    print(f"speed: {speed.describe()} ({speed.reason}); hardware: {hw.describe()}", file=sys.stderr, flush=True)
    return speed.validate()
