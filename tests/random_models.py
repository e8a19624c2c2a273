"""The models the server benchmarks serve: `tiny`, or a random model with Gepard-1.0's full shape
(and a random codec), on the fastest CPU path the speed layer picks. Plain Python: benchmarks
import it with tests/ on sys.path."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def random_engine(size: str) -> tuple[Any, Any]:
    """(engine, codec) for size "tiny" or "full"."""
    from gepard_demo.codec import build_random_codec, load_codec
    from gepard_demo.model.engine import GepardEngine
    from gepard_demo.model.full_size import build_full_size_engine
    from gepard_demo.model.tiny import ensure_tiny
    from gepard_demo.speed.flags import speed_for
    from gepard_demo.speed.select import apply_speed

    cache = Path.home() / ".cache" / "gepard-demo"
    if size == "tiny":
        engine = GepardEngine.load(str(ensure_tiny(cache)))
        codec = load_codec(engine.codec_source())
    else:
        engine, codec = build_full_size_engine(ensure_tiny(cache)), build_random_codec(seed=0)
    return apply_speed(engine, speed_for(engine, "cpu", "auto", 0, "off")), codec
