"""Several streams' next chunks through one decoder call, each with its own exact state.

The causal HiFi-GAN keeps, per stream, each layer's left context (a conv) or spill-over (a
transposed conv) in a dict keyed by layer (hifigan.py). Stacking the streams' states along the
batch axis, with zeros where a fresh stream has none yet (exactly what a fresh stream starts
from), and decoding their chunks as one batch gives each stream the samples its own push would
give to float rounding, and leaves each its own state afterwards. Only chunks of the same frame
count can share a call (a conv's state is the chunk's last columns).

The promise is "the same frames, audio within rounding", not bit-equal audio: a batched conv
picks other kernels and summation orders than a lone one, and which it picks depends on the CPU
(facts §14). Measured, float samples differ from the solo push's by at most 1.8e-7 at the full
codec size under AVX2 and AVX-512 (a few in a thousand samples, 1 LSB apart as 16-bit PCM);
the tests hold them to 1e-5, which as 16-bit PCM is at most 1 LSB. Bit-equal audio would need
every push, a lone stream's too, to run at one fixed batch shape: 3.2x the cost of a lone
10-frame chunk here (benchmarks/concurrency.py --codec-only, "exactness"). docs/DESIGN.md.

Whether this is faster depends on the hardware: the decoder is compute-bound on a CPU, so a
batch costs about the sum of its rows there; on a GPU a chunk of one stream leaves the device
mostly idle. benchmarks/concurrency.py measures both ways side by side and `decode_together`
is used where it wins (gepard_demo.batching.codec_pool).
"""

from __future__ import annotations

import numpy as np
import torch

from .fsq import Codes, dequantize
from .stream import ExactStreamDecoder


def decode_together(streams: list[ExactStreamDecoder], codes: list[Codes]) -> list[np.ndarray]:
    """Push codes[i] into streams[i], all in one decoder call; returns each stream's samples."""
    if len(streams) != len(codes) or not streams:
        raise ValueError(f"{len(streams)} streams for {len(codes)} chunks")
    first = streams[0]
    if any(s.decoder is not first.decoder for s in streams):
        raise ValueError("streams of different decoders cannot share a call")
    xs = [dequantize(c, s.layout, frame_offset=s.frames_pushed) for s, c in zip(streams, codes)]
    n = xs[0].shape[0]
    if any(x.shape[0] != n for x in xs):
        raise ValueError(f"chunks of different lengths cannot share a call: {[x.shape[0] for x in xs]} frames")
    if n == 0:
        return [np.zeros(0, dtype=np.float32) for _ in streams]
    # On the first stream's CUDA stream (stream.py): every push ends with its audio read back, so
    # the other streams' states are complete here.
    with first.side(), torch.inference_mode():
        x = torch.stack([x.T for x in xs]).to(first.device)  # (streams, codes, frames)
        states = [s._state for s in streams]
        layers = {layer for st in states for layer in st}
        state = {}
        for layer in layers:
            shape = next(st[layer] for st in states if layer in st).shape[1:]
            state[layer] = torch.cat([st[layer] if layer in st else x.new_zeros(1, *shape) for st in states])
        audio = first.decoder(x, state)
        for i, (s, st) in enumerate(zip(streams, states)):
            for layer, value in state.items():
                st[layer] = value[i : i + 1].clone()
            s.frames_pushed += n
        return [a.float().cpu().numpy() for a in audio]
