"""Per-dimension FSQ codes -> the decoder's continuous input, matching NeMo's GroupFiniteScalarQuantizer.

Gepard emits one code per FSQ dimension (32 = 8 groups x 4 dims, levels [8,7,6,6]); column
`g * dims + d` is dimension d of group g, the order NeMo's quantizer concatenates its groups.
NeMo itself works with one mixed-radix token per group (token = sum code_d * prod(levels[:d]));
`codes_to_tokens` / `tokens_to_codes` convert, so the NeMo backend and the parity tests can use
NeMo's own dequantization.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import torch

from .errors import CodecLoadError

# Integer codes as every codec function takes them, (T, 32) or (32,) a frame: a LongTensor, an
# array, or nested lists (anything np.asarray reads as one).
Codes = Union[torch.Tensor, np.ndarray, Sequence[Sequence[int]], Sequence[int]]


@dataclass(frozen=True)
class FSQLayout:
    num_groups: int
    levels_per_group: tuple[int, ...]

    @property
    def levels(self) -> tuple[int, ...]:
        return tuple(self.levels_per_group) * self.num_groups

    @property
    def num_codes(self) -> int:
        return self.num_groups * len(self.levels_per_group)

    @classmethod
    def from_config(cls, vq: dict[str, Any] | None) -> "FSQLayout":
        if not vq:
            raise CodecLoadError("codec config has no vector_quantizer: cannot map codes to decoder input")
        target = str(vq.get("_target_", ""))
        if target.endswith("GroupFiniteScalarQuantizer"):
            return cls(int(vq["num_groups"]), tuple(int(x) for x in vq["num_levels_per_group"]))
        if target.endswith("FiniteScalarQuantizer"):
            return cls(1, tuple(int(x) for x in vq["num_levels"]))
        raise CodecLoadError(f"unsupported vector_quantizer {target!r}: only (Group)FiniteScalarQuantizer")


NANOCODEC_LAYOUT = FSQLayout(8, (8, 7, 6, 6))


def _as_long_tensor(codes: Codes) -> torch.Tensor:
    if isinstance(codes, torch.Tensor):
        t = codes
    else:
        t = torch.as_tensor(np.asarray(codes))
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"codes must be integers, got dtype {t.dtype}")
    return t.long()


def check_codes(codes: Codes, layout: FSQLayout = NANOCODEC_LAYOUT, *, frame_offset: int = 0) -> torch.Tensor:
    """(T, num_codes) integer codes as a LongTensor, or ValueError naming the first bad code."""
    t = _as_long_tensor(codes)
    if t.dim() != 2 or t.shape[1] != layout.num_codes:
        raise ValueError(f"codes must have shape (T, {layout.num_codes}), got {tuple(t.shape)}")
    levels = torch.tensor(layout.levels, dtype=torch.long, device=t.device)
    bad = (t < 0) | (t >= levels)
    if bool(bad.any()):
        frame, channel = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"code out of range at frame {frame + frame_offset}, channel {channel}: "
            f"value {int(t[frame, channel])}, allowed 0..{layout.levels[channel] - 1}"
        )
    return t


def dequantize(codes: Codes, layout: FSQLayout = NANOCODEC_LAYOUT, *, frame_offset: int = 0) -> torch.Tensor:
    """(T, 32) codes -> (T, 32) float32 decoder input: per dim (code - L//2) / (L//2).

    The same arithmetic as NeMo's FiniteScalarQuantizer.nonnegative_to_codes (integer half,
    so an even L reaches -1 but not +1), hence bit-equal to NeMo's dequantize.
    """
    t = check_codes(codes, layout, frame_offset=frame_offset)
    half = torch.tensor([lv // 2 for lv in layout.levels], dtype=torch.long, device=t.device)
    return ((t - half).float() / half.float()).contiguous()


@functools.lru_cache(maxsize=8)
def _np_levels(layout: FSQLayout) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    levels = np.asarray(layout.levels, dtype=np.int64)
    half = levels // 2
    return levels, half, half.astype(np.float32)


def dequantize_np(codes: Codes, layout: FSQLayout = NANOCODEC_LAYOUT, *, frame_offset: int = 0) -> np.ndarray:
    """`dequantize` in NumPy: (T, 32) host codes -> a float32 (T, 32) array, bit-equal to it (the
    same integer half, one float32 division), without a torch op: a graphed codec stream's host
    side (codec/graphed.py) queues nothing but its copies and its replay. Bad codes raise
    check_codes' error."""
    if isinstance(codes, torch.Tensor):
        codes = codes.cpu()
    a = np.asarray(codes)
    levels, half, half_f = _np_levels(layout)
    if a.ndim != 2 or a.shape[1] != layout.num_codes or a.dtype.kind not in "iu" or ((a < 0) | (a >= levels)).any():
        check_codes(codes, layout, frame_offset=frame_offset)  # raises, naming the first bad code
    return (a.astype(np.int64) - half).astype(np.float32) / half_f


def _bases(layout: FSQLayout) -> list[int]:
    bases, b = [], 1
    for lv in layout.levels_per_group:
        bases.append(b)
        b *= lv
    return bases


def codes_to_tokens(codes: Codes, layout: FSQLayout = NANOCODEC_LAYOUT) -> torch.Tensor:
    """(T, G*D) per-dim codes -> (T, G) NeMo group tokens (mixed radix, first dim least significant)."""
    t = check_codes(codes, layout)
    d = len(layout.levels_per_group)
    bases = torch.tensor(_bases(layout), dtype=torch.long, device=t.device)
    return (t.view(t.shape[0], layout.num_groups, d) * bases).sum(-1)


def tokens_to_codes(tokens: Codes, layout: FSQLayout = NANOCODEC_LAYOUT) -> torch.Tensor:
    """(T, G) NeMo group tokens -> (T, G*D) per-dim codes (Gepard's layout)."""
    t = _as_long_tensor(tokens)
    bases = torch.tensor(_bases(layout), dtype=torch.long, device=t.device)
    levels = torch.tensor(layout.levels_per_group, dtype=torch.long, device=t.device)
    codes = (t.unsqueeze(-1) // bases) % levels
    return codes.reshape(t.shape[0], layout.num_codes)


@dataclass(frozen=True)
class Quantized:
    """GroupFSQ of an encoder latent, with what the rounding saw.

    codes: (B, T, G*D) per-dim codes, Gepard's layout (NeMo's group tokens unfolded).
    tokens: (B, T, G) NeMo's group tokens (mixed radix, first dim least significant).
    pre_round: (B, T, G*D) the compressed values that were rounded: a value within float noise
        of a boundary (k + 0.5) can round either way in two implementations.
    """

    codes: torch.Tensor
    tokens: torch.Tensor
    pre_round: torch.Tensor


def quantize(latent: torch.Tensor, layout: FSQLayout = NANOCODEC_LAYOUT, eps: float = 1e-3) -> Quantized:
    """(B, G*D, T) encoder output -> codes, with NeMo's FiniteScalarQuantizer arithmetic in fp32.

    Per dim with L levels: s = (L-1)/2 * (1-eps), o = 0.5 for even L else 0,
    compressed = s * tanh(x + tan(o/s)) - o, rounded to the nearest integer (half to even, as
    torch.round). NeMo then goes through [-1, 1] and back (r / (L//2) * (L//2) + L//2) and
    truncates the weighted sum to int32; the same steps are taken here so the tokens agree
    bit for bit on identical latents.
    """
    if latent.dim() != 3 or latent.shape[1] != layout.num_codes:
        raise ValueError(f"latent must be (B, {layout.num_codes}, T), got {tuple(latent.shape)}")
    x = latent.float()
    levels = torch.tensor(layout.levels, dtype=torch.int32, device=x.device).view(1, -1, 1)
    scale = (levels - 1) / 2 * (1 - eps)
    offset = torch.where(levels % 2 == 0, 0.5, 0.0)
    shift = (offset / scale).tan()
    compressed = scale * (x + shift).tanh() - offset
    half = levels // 2
    nonneg = torch.round(compressed) / half * half + half
    d = len(layout.levels_per_group)
    bases = torch.tensor(_bases(layout), dtype=torch.int32, device=x.device).view(1, 1, d, 1)
    b, _, t = x.shape
    tokens = (nonneg.view(b, layout.num_groups, d, t) * bases).sum(dim=2).to(torch.int32).long()  # (B, G, T)
    codes = tokens_to_codes(tokens.transpose(1, 2).reshape(b * t, layout.num_groups), layout).view(b, t, -1)
    return Quantized(codes=codes, tokens=tokens.transpose(1, 2), pre_round=compressed.transpose(1, 2))
