"""Both decode loops on one engine: the growing cache (model/batch.DecodeBatch) and the fixed-shape
step (model/fixed_shape/fixed_batch.FixedBatch, eager on a CPU), so a test of frames runs through each."""

from __future__ import annotations

from contextlib import contextmanager

LOOPS = ("growing", "fixed")


@contextmanager
def running(engine, loop: str):
    """`engine` decoding with `loop` inside the block, the CPU's own (the growing cache) after."""
    engine.use_loop("on" if loop == "fixed" else "off")
    try:
        yield engine
    finally:
        engine.use_loop("auto")
