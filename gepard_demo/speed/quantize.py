"""Lower-precision weights for the talker's backbone, applied to a loaded GepardTalker.

At batch 1 a decode step is memory-bound: fp32 reads ~1.04 GB of backbone weights per frame.
The kernels that make fewer bytes pay on any x86 CPU (AVX2 included) are PyTorch's own fbgemm
linears: `linear_dynamic_fp16` (fp16 weights, fp32 math: half the bytes, error ~1e-4) and the
dynamic int8 linear (int8 weights per output channel, the activation row quantized to 7 bits on
the fly: a quarter of the bytes). The weight-only int8/int4 kernels (`_weight_int8pack_mm`,
`_weight_int4pack_mm_for_cpu`) are vectorized for AVX-512 only and are 4-20x slower than fp32 on
an AVX2 CPU (benchmarks/cpu_realtime.py prints the kernel table).

Dynamic int8 on every linear misses the fidelity guard on the real-shape model (|dp_stop| 0.022
after 30 steps): the inputs of o_proj (attention output) and down_proj (the SwiGLU product) are
heavy-tailed, and one 7-bit scale per row loses their small values. So "int8" quantizes only the
linears fed by an RMSNorm (q, k, v, gate, up: 68% of the weights) and keeps o_proj and down_proj
at fp16 weights.

Only `talker.model.layers` (and, for bf16 / fp16, the final norm) changes. The token
embeddings, the 32 codebook heads, the stop head and the frame embedding stay fp32 in every
precision, on a CPU and on a GPU alike: the heads and the stop head decide every sample.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch
from torch import nn

from .settings import PRECISIONS, SpeedError

if TYPE_CHECKING:
    from gepard_demo.model.talker import GepardTalker

BACKBONE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# Linears whose input comes straight from an RMSNorm: well-behaved rows, safe at int8.
INT8_LINEARS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")


def quantized_kernels_available() -> bool:
    return any(e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm"))


def _quantize(layers: nn.Module, names: list[str], dtype: torch.dtype) -> None:
    from torch.ao.quantization import float16_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    qconfig = per_channel_dynamic_qconfig if dtype == torch.qint8 else float16_dynamic_qconfig
    with warnings.catch_warnings():
        # torch.ao's eager quantization is marked deprecated in favour of torchao, which has no
        # fast batch-1 path on AVX2 CPUs; the fbgemm kernels underneath are current.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        quantize_dynamic(layers, {n: qconfig for n in names}, dtype=dtype, inplace=True)


def quantize_backbone(talker: GepardTalker, precision: str) -> GepardTalker:
    """Swap the backbone layers' nn.Linear modules for fbgemm ones, in place ("fp16w" or "int8")."""
    if not quantized_kernels_available():
        raise SpeedError(f"this PyTorch has no x86/fbgemm quantized engine ({torch.backends.quantized.supported_engines})")
    if talker.device.type != "cpu" or talker.backbone_dtype != torch.float32:
        raise SpeedError(f"{precision} needs the fp32 talker on the CPU")
    layers = talker.model.layers
    linears = [n for n, m in layers.named_modules() if isinstance(m, nn.Linear)]
    if precision == "int8":
        int8 = [n for n in linears if n.rsplit(".", 1)[-1] in INT8_LINEARS]
        _quantize(layers, int8, torch.qint8)
        linears = [n for n in linears if n not in int8]
    elif precision != "fp16w":
        raise SpeedError(f"quantize_backbone takes fp16w or int8, not {precision!r}")
    _quantize(layers, linears, torch.float16)
    return talker


def apply_precision(talker: GepardTalker, precision: str) -> GepardTalker:
    """The talker at `precision` (PRECISIONS), in place; returns it."""
    if precision not in PRECISIONS:
        raise SpeedError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision in ("int8", "fp16w"):
        return quantize_backbone(talker, precision)
    if precision in BACKBONE_DTYPES:  # the layers only: embeddings and heads stay fp32
        return talker.set_backbone_dtype(BACKBONE_DTYPES[precision])
    return talker


def backbone_bytes(talker: GepardTalker) -> int:
    """Bytes of backbone layer weights a decode step reads."""
    total = 0
    for module in talker.model.layers.modules():
        if callable(weight := getattr(module, "weight", None)):  # a quantized linear: weight() is int8 / fp32
            w = weight()
            total += w.numel() * (1 if w.dtype == torch.qint8 else 2)  # fp16w packs fp16
        else:
            for p in module.parameters(recurse=False):
                total += p.numel() * p.element_size()
    return total
