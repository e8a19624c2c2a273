"""Shared, process-cached codec objects for tests/codec/.

Building a full-size random codec, writing its .nemo and importing/restoring NeMo are slow, so
each is done once per pytest process (functools.cache) no matter how many test modules use it.
Files live in one temporary folder removed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch

from gepard_demo.codec import NANOCODEC_LAYOUT, load_codec, make_tiny_codec
from gepard_demo.codec.tiny import write_random_codec

TOL = 1e-5  # max abs difference allowed between decodes that must be equal (fp32)
# The pooled decode's promise (codec/batched.py): within float rounding of a solo push, which as
# 16-bit PCM (floor(x * 32768)) is at most one step apart. Not bit-equal: that depends on the CPU.
POOLED_TOL = 1e-5
POOLED_PCM16_LSB = 1
FULL_FRAMES = 100  # frames decoded at full size: enough to span several receptive fields


@functools.cache
def workdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="gepard-codec-tests-"))
    atexit.register(shutil.rmtree, d, True)
    return d


def random_codes(n_frames: int, seed: int = 0, layout=NANOCODEC_LAYOUT) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, lv, n_frames) for lv in layout.levels], axis=1).astype(np.int64)


@contextlib.contextmanager
def torch_threads(n: int):
    """On a 2-core box shared with other processes, one thread is steadier for the big decoder."""
    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@functools.cache
def tiny_path() -> Path:
    return make_tiny_codec(workdir() / "tiny.nemo", seed=0)


@functools.cache
def tiny_native():
    return load_codec(tiny_path())


@functools.cache
def full_path() -> Path:
    # encoder kept small: only the decoder is compared, and the file stays ~130 MB
    return write_random_codec(workdir() / "full.nemo", seed=1, decoder_channels=864, encoder_channels=4)


@functools.cache
def full_native():
    return load_codec(full_path())


@functools.cache
def full_codes() -> np.ndarray:
    return random_codes(FULL_FRAMES, seed=7)


@functools.cache
def full_whole_decode() -> np.ndarray:
    with torch_threads(1):
        return full_native().decode_single_pass(full_codes())


@functools.cache
def tiny_nemo():
    return load_codec(tiny_path(), backend="nemo")


@functools.cache
def full_nemo():
    return load_codec(full_path(), backend="nemo")


def max_diff(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
