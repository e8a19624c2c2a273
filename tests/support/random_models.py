"""The models the server benchmarks serve: `tiny`, or a random model with Gepard-1.0's full shape
(and a random codec), on the fastest CPU path the speed layer picks. Plain Python: benchmarks
import it with tests/ on sys.path."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def random_engine(size: str, device: str = "cpu") -> tuple[Any, Any]:
    """(engine, codec) for size "tiny" or "full", with the speed layer's pick for `device` (on a
    GPU: the precision it loads at, and the decode step as CUDA graphs)."""
    from gepard_demo.codec import build_random_codec, load_codec
    from gepard_demo.model.checkpoints.full_size import build_full_size_engine
    from gepard_demo.model.checkpoints.tiny import ensure_tiny
    from gepard_demo.model.engine import GepardEngine
    from gepard_demo.speed.flags import speed_for
    from gepard_demo.speed.select import apply_speed, load_dtype

    cache = Path.home() / ".cache" / "gepard-demo"
    dtype = load_dtype(device, "auto")
    if size == "tiny":
        engine = GepardEngine.load(str(ensure_tiny(cache)), device=device, dtype=dtype)
        codec = load_codec(engine.codec_source(), device=device)
    else:
        engine = build_full_size_engine(ensure_tiny(cache), dtype=dtype, device=device)
        codec = build_random_codec(seed=0, device=device)
    return apply_speed(engine, speed_for(engine, device, "auto", 0, "off")), codec
