"""What the Eval tab's sections share: the app's engine as an eval engine (holding the app's
lock while it synthesizes), and charts as images for a Gallery."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


class LockedEngine:
    """An eval engine that holds the app's engine lock while it synthesizes a batch."""

    def __init__(self, inner, lock):
        self.inner, self.lock, self.name = inner, lock, inner.name

    def describe(self) -> dict:
        return self.inner.describe()

    def synthesize(self, requests, sampling, stream):
        if self.lock is None:
            return self.inner.synthesize(requests, sampling, stream)
        with self.lock:
            return self.inner.synthesize(requests, sampling, stream)


def eval_engine_from_provider(engine_provider: Callable[[], Any], engine_name: str = "local"):
    if engine_name == "piper":
        from eval.engines.piper import PiperReference

        return PiperReference.load()
    from eval.engines.local import GepardLocal

    engine = engine_provider()
    codec = getattr(engine_provider, "codec", None)
    if codec is None:
        from gepard_demo.codec import load_codec

        codec = load_codec(engine.codec_source())
    return LockedEngine(GepardLocal(engine, codec), getattr(engine_provider, "lock", None))


def chart_images(paths) -> list:
    """Charts as in-memory images with their names, for a Gallery.

    Gradio serves in-memory images from its cache wherever runs_dir lives (file paths outside
    the app's allowed folders would be refused).
    """
    from PIL import Image

    out = []
    for p in paths:
        with Image.open(p) as im:
            out.append((im.copy(), Path(p).stem))
    return out
