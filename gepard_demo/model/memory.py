"""How much GPU memory a batch of rows x frames needs, so one that cannot fit is refused up front
instead of failing with CUDA out-of-memory after minutes of other work (or taking the GPU from
everyone else on a shared one).

What grows with the request is the KV cache: every full-attention layer keeps K and V, kv_heads x
head_dim values each, for every position of every row (prompt + frames), at the backbone's dtype.
(A Gated-DeltaNet layer's state is fixed per row, a few MB.) On top of it: one step's activations
(the MLP's intermediate width per row, the prefill's per prompt token), the logits, and a fixed
margin for the codec's decode and the allocator's rounding. benchmarks/gpu_smoke.py prints this
estimate beside the measured peak.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .config import full_attention_layers

if TYPE_CHECKING:
    from .seams import Engine

MARGIN_BYTES = 512 * 2**20  # codec decode of one 86-frame block, allocator rounding, cuBLAS workspace


class GpuMemoryError(ValueError):
    """The batch would not fit in the GPU's free memory; the message says what to lower."""


def kv_bytes_per_position(backbone, dtype: torch.dtype) -> int:
    return full_attention_layers(backbone) * 2 * backbone.num_key_value_heads * backbone.head_dim * torch.finfo(dtype).bits // 8


def batch_bytes(config, rows: int, prompt_tokens: int, frames: int, dtype: torch.dtype) -> int:
    """Bytes a batch needs beyond the weights (module docstring)."""
    b = config.backbone
    width = torch.finfo(dtype).bits // 8
    kv = rows * (prompt_tokens + frames) * kv_bytes_per_position(b, dtype)
    linear_state = rows * (b.num_hidden_layers - full_attention_layers(b)) * 8 * 2**20
    prefill = rows * prompt_tokens * (b.intermediate_size * 3 + b.hidden_size * 4) * width
    return kv + linear_state + prefill + MARGIN_BYTES


def check_fits(engine: Engine, rows: int, prompt_tokens: int, frames: int) -> None:
    """Raise GpuMemoryError when the batch needs more than the engine's GPU has free; nothing on a CPU."""
    device = engine.device
    if device.type != "cuda":
        return
    need = batch_bytes(engine.config, rows, prompt_tokens, frames, engine.talker.backbone_dtype)
    free, total = torch.cuda.mem_get_info(device)
    free += torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)  # torch's own cache is free to it
    if need > free:
        gib = 2**30
        raise GpuMemoryError(
            f"a batch of {rows} rows x {frames} frames (prompts up to {prompt_tokens} tokens) needs about "
            f"{need / gib:.1f} GiB of GPU memory; {free / gib:.1f} of {total / gib:.1f} GiB is free: lower the batch "
            "size or max_frames")
