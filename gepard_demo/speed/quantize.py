"""Lower-precision weights for the talker's backbone, applied to a loaded GepardTalker.

At batch 1 a decode step is memory-bound: fp32 reads ~1.04 GB of backbone weights per frame.
int8 reads a quarter of that. The kernel that makes this pay on any x86 CPU is PyTorch's own
dynamic int8 linear (fbgemm/x86 backend: int8 weights per output channel, the activation row
quantized on the fly, int32 accumulation); the weight-only int8/int4 kernels
(`_weight_int8pack_mm`, `_weight_int4pack_mm_for_cpu`) are vectorized for AVX-512 only and are
10-20x slower than fp32 on an AVX2 CPU (benchmarks/cpu_realtime.py prints the kernel table).

Only `talker.model.layers` (the 14 decoder layers' q/k/v/o and MLP projections) change. The
token embeddings, the 32 codebook heads, the stop head and the frame embedding stay fp32:
they are small per step, and the heads and the stop head decide every sample.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from .settings import PRECISIONS, SpeedError


def int8_supported() -> bool:
    return any(e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm"))


def quantize_backbone_int8(talker: nn.Module) -> nn.Module:
    """Swap every nn.Linear in the backbone's decoder layers for a dynamic int8 linear, in place."""
    if not int8_supported():
        raise SpeedError(f"this PyTorch has no x86/fbgemm quantized engine ({torch.backends.quantized.supported_engines})")
    if talker.null_prefix.device.type != "cpu" or talker.null_prefix.dtype != torch.float32:
        raise SpeedError("int8 quantization needs the fp32 talker on the CPU")
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():
        # torch.ao's eager quantization is marked deprecated in favour of torchao, which has no
        # fast batch-1 int8 path on AVX2 CPUs; the kernels themselves are current.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        quantize_dynamic(talker.model.layers, {nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8, inplace=True)
    return talker


def apply_precision(talker: nn.Module, precision: str) -> nn.Module:
    """The talker at `precision` (PRECISIONS), in place where possible; returns it."""
    if precision not in PRECISIONS:
        raise SpeedError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "int8":
        return quantize_backbone_int8(talker)
    if precision == "bf16":
        return talker.to(torch.bfloat16)
    if precision == "fp16":
        return talker.to(torch.float16)
    return talker


def backbone_bytes(talker: nn.Module) -> int:
    """Bytes of backbone layer weights a decode step reads (packed int8 counted as 1 byte)."""
    total = 0
    for module in talker.model.layers.modules():
        if callable(getattr(module, "weight", None)):  # a quantized linear: weight() is int8
            total += module.weight().numel()
        else:
            for p in module.parameters(recurse=False):
                total += p.numel() * p.element_size()
    return total
