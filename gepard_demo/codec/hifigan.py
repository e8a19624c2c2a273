"""Our own causal HiFi-GAN decoder, numerically the same network as NeMo's CausalHiFiGANDecoder.

The module tree mirrors NeMo's attribute names (pre_conv.conv, activations.i.activation,
up_sample_conv_layers.i.conv, res_layers.i.res_blocks.j.res_blocks.k.*, post_conv.conv) so a
`.nemo`'s `audio_decoder.*` weights load with strict key checking once weight norm is folded.

Streaming: every layer is causal, so the only history a layer needs is
- a causal conv: the last (kernel-1)*dilation input columns (its left context), and
- a transposed conv: the (kernel-stride) output samples that spill past the chunk (its overlap),
which `forward(x, state)` keeps in `state` (a dict keyed by layer). A whole decode is one call
with an empty state; feeding frames in pieces with the same state gives the same samples.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import CodecLoadError

DECODER_TARGET = "nemo.collections.tts.modules.audio_codec_modules.CausalHiFiGANDecoder"
ACTIVATIONS = ("lrelu", "elu", "snake", "half_snake")
OUTPUT_ACTIVATIONS = ("tanh", "clamp")


@dataclass(frozen=True)
class DecoderConfig:
    """CausalHiFiGANDecoder's constructor arguments; the defaults are NeMo 3.0's own, used for
    any key a checkpoint's yaml leaves out."""

    input_dim: int
    up_sample_rates: tuple[int, ...] = (8, 8, 2, 2)
    base_channels: int = 512
    in_kernel_size: int = 7
    out_kernel_size: int = 3
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[int, ...] = (1, 3, 5)
    activation: str = "lrelu"
    output_activation: str = "tanh"
    # NeMo hands pad_mode to nn.Conv1d with padding=0 and pads causally with zeros itself, so
    # it never changes the output; kept to round-trip the config and to validate it.
    pad_mode: str = "zeros"
    n_groups_equal_to_out_channels: bool = True

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.up_sample_rates)

    @classmethod
    def from_config(cls, dec: dict[str, Any] | None) -> "DecoderConfig":
        if not dec:
            raise CodecLoadError("codec config has no audio_decoder section")
        dec = dict(dec)
        target = str(dec.pop("_target_", ""))
        if not target.endswith("CausalHiFiGANDecoder"):
            raise CodecLoadError(
                f"audio_decoder is {target!r}; the native backend implements CausalHiFiGANDecoder only "
                "(use backend='nemo' for other decoders)"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(dec) - known)
        if unknown:
            # An argument we do not model could change the math: refuse rather than guess.
            raise CodecLoadError(f"audio_decoder has arguments the native decoder does not know: {unknown}")
        if "input_dim" not in dec:
            raise CodecLoadError("audio_decoder.input_dim is missing")
        for key in ("up_sample_rates", "resblock_kernel_sizes", "resblock_dilation_sizes"):
            if key in dec:
                dec[key] = tuple(int(v) for v in dec[key])
        for key in ("input_dim", "base_channels", "in_kernel_size", "out_kernel_size"):
            if key in dec:
                dec[key] = int(dec[key])
        cfg = cls(**dec)
        return cfg

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> None:
        act = self.activation.lower()
        if act not in ACTIVATIONS:
            raise CodecLoadError(f"audio_decoder.activation {self.activation!r} not one of {ACTIVATIONS}")
        if self.output_activation not in OUTPUT_ACTIVATIONS:
            raise CodecLoadError(
                f"audio_decoder.output_activation {self.output_activation!r} not one of {OUTPUT_ACTIVATIONS}"
            )
        if self.pad_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise CodecLoadError(f"audio_decoder.pad_mode {self.pad_mode!r} is not a Conv1d padding mode")
        if not self.up_sample_rates or min(self.up_sample_rates) < 1:
            raise CodecLoadError(f"audio_decoder.up_sample_rates {self.up_sample_rates} must be positive")
        if self.base_channels % (2 ** len(self.up_sample_rates)):
            raise CodecLoadError(
                f"audio_decoder.base_channels {self.base_channels} must halve {len(self.up_sample_rates)} times"
            )

    def to_config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"_target_": DECODER_TARGET}
        for k, v in asdict(self).items():
            out[k] = list(v) if isinstance(v, tuple) else v
        return out


State = dict  # layer -> carried tensor; one per stream


def snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    # NeMo's formula, eps included, so values agree to the last bits.
    return x + (alpha + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2)


class Snake(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return snake(x, self.alpha)


class HalfSnake(nn.Module):
    """Snake on the first channels // 2 channels, leaky ReLU (slope 0.01) on the rest."""

    def __init__(self, channels: int):
        super().__init__()
        self.snake_channels = channels // 2
        self.snake_act = Snake(self.snake_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.snake_channels
        return torch.cat([self.snake_act(x[:, :c]), F.leaky_relu(x[:, c:], 0.01)], dim=1)


class Activation(nn.Module):
    """Holds the activation under `.activation`, the attribute NeMo's CodecActivation uses."""

    def __init__(self, name: str, channels: int):
        super().__init__()
        name = name.lower()
        self.activation: nn.Module
        if name == "lrelu":
            self.activation = nn.LeakyReLU()
        elif name == "elu":
            self.activation = nn.ELU()
        elif name == "snake":
            self.activation = Snake(channels)
        elif name == "half_snake":
            self.activation = HalfSnake(channels)
        else:
            raise CodecLoadError(f"unknown activation {name!r}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(x)


class CausalConv(nn.Module):
    """Stride-1 causal conv: zero left context at the start of a stream, carried afterwards."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1, groups: int = 1):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, dilation=dilation, groups=groups)
        self.context = (kernel - 1) * dilation

    def forward(self, x: torch.Tensor, state: State) -> torch.Tensor:
        if self.context:
            left = state.get(self)
            if left is None:
                left = x.new_zeros(x.shape[0], x.shape[1], self.context)
            x = torch.cat([left, x], dim=-1)
            # clone: a view would pin the whole padded chunk until the next push
            state[self] = x[..., -self.context :].clone()
        return self.conv(x)


class CausalConvTranspose(nn.Module):
    """Transposed conv trimmed on the right (NeMo's trim_right_ratio=1): n frames in, n*stride
    samples out. The kernel-stride samples each chunk spills past its end are added to the head
    of the next chunk; the bias is added once, after that sum."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, groups: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, kernel, stride, groups=groups)
        self.stride = stride
        self.overlap = kernel - stride

    def forward(self, x: torch.Tensor, state: State) -> torch.Tensor:
        conv = self.conv
        y = F.conv_transpose1d(x, conv.weight, None, self.stride, groups=conv.groups)
        n_out = x.shape[-1] * self.stride
        if self.overlap > 0:
            carry = state.get(self)
            if carry is not None:
                y[..., : self.overlap] += carry
            state[self] = y[..., n_out:].clone()
            y = y[..., :n_out]
        assert conv.bias is not None  # made with one (nn.ConvTranspose1d's default)
        return y + conv.bias.view(1, -1, 1)


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, kernel: int, dilation: int, activation: str):
        super().__init__()
        self.input_activation = Activation(activation, channels)
        self.skip_activation = Activation(activation, channels)
        self.input_conv = CausalConv(channels, channels, kernel, dilation=dilation)
        self.skip_conv = CausalConv(channels, channels, kernel)

    def forward(self, x: torch.Tensor, state: State) -> torch.Tensor:
        h = self.input_conv(self.input_activation(x), state)
        h = self.skip_conv(self.skip_activation(h), state)
        return x + h


class ResBlockChain(nn.Module):
    """NeMo's HiFiGANResBlock: one residual block per dilation, in sequence."""

    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...], activation: str):
        super().__init__()
        self.res_blocks = nn.ModuleList(ResidualBlock(channels, kernel, d, activation) for d in dilations)

    def forward(self, x: torch.Tensor, state: State) -> torch.Tensor:
        for block in self.res_blocks:
            x = block(x, state)
        return x


class ResLayer(nn.Module):
    """NeMo's HiFiGANResLayer: the mean of one chain per kernel size."""

    def __init__(self, channels: int, kernels: tuple[int, ...], dilations: tuple[int, ...], activation: str):
        super().__init__()
        self.res_blocks = nn.ModuleList(ResBlockChain(channels, k, dilations, activation) for k in kernels)

    def forward(self, x: torch.Tensor, state: State) -> torch.Tensor:
        outs = [chain(x, state) for chain in self.res_blocks]
        return sum(outs) / len(outs)  # the same summation order as NeMo


class CausalHiFiGANDecoder(nn.Module):
    """(B, input_dim, T) -> (B, T * samples_per_frame) audio in [-1, 1].

    `cpu_bf16`: on a CPU, run the convolutions under bf16 autocast (the speed layer turns it on
    where the CPU has native bf16 math, AVX512-BF16 / AMX: 1.5x at 42 dB SNR against fp32 on the
    full-size random codec, above the 40 dB guard; benchmarks/cpu_realtime.py). Off by default:
    then streaming equals one whole decode to float rounding, as the tests hold it."""

    cpu_bf16 = False

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        act = cfg.activation
        self.pre_conv = CausalConv(cfg.input_dim, cfg.base_channels, cfg.in_kernel_size)
        self.activations = nn.ModuleList()
        self.up_sample_conv_layers = nn.ModuleList()
        self.res_layers = nn.ModuleList()
        ch = cfg.base_channels
        for rate in cfg.up_sample_rates:
            out = ch // 2
            self.activations.append(Activation(act, ch))
            groups = out if cfg.n_groups_equal_to_out_channels else 1
            self.up_sample_conv_layers.append(CausalConvTranspose(ch, out, 2 * rate, rate, groups))
            self.res_layers.append(ResLayer(out, cfg.resblock_kernel_sizes, cfg.resblock_dilation_sizes, act))
            ch = out
        self.post_activation = Activation(act, ch)
        self.post_conv = CausalConv(ch, 1, cfg.out_kernel_size)

    @property
    def samples_per_frame(self) -> int:
        return self.cfg.samples_per_frame

    def forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        if self.cpu_bf16 and x.device.type == "cpu":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return self._forward(x, state).float()
        return self._forward(x, state)

    def _forward(self, x: torch.Tensor, state: State | None = None) -> torch.Tensor:
        state = {} if state is None else state
        h = self.pre_conv(x, state)
        for act, up, res in zip(self.activations, self.up_sample_conv_layers, self.res_layers):
            h = res(up(act(h), state), state)
        h = self.post_conv(self.post_activation(h), state)
        if self.cfg.output_activation == "clamp":
            h = h.clamp(-1.0, 1.0)
        else:
            h = torch.tanh(h)
        return h[:, 0, :]


_WN_SUFFIXES = (
    (".parametrizations.weight.original0", ".parametrizations.weight.original1"),  # torch >= 2.1
    (".weight_g", ".weight_v"),  # the older nn.utils.weight_norm
)


def fold_weight_norm(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Replace each weight-norm (g, v) pair by the plain weight, computed with the same kernel
    (torch._weight_norm over dim 0) NeMo's parametrization runs, so the weights are bit-equal."""
    out: dict[str, torch.Tensor] = {}
    paired: set[str] = set()
    for key, value in state.items():
        for g_sfx, v_sfx in _WN_SUFFIXES:
            if key.endswith(g_sfx):
                base = key[: -len(g_sfx)]
                v_key = base + v_sfx
                if v_key not in state:
                    raise CodecLoadError(f"weight norm magnitude {key} has no direction tensor {v_key}")
                out[base + ".weight"] = torch._weight_norm(state[v_key].float(), value.float(), 0)
                paired.update((key, v_key))
    for key, value in state.items():
        if key in paired:
            continue
        if any(key.endswith(v_sfx) for _, v_sfx in _WN_SUFFIXES):
            raise CodecLoadError(f"weight norm direction {key} has no magnitude tensor")
        out[key] = value.float() if value.is_floating_point() else value
    return out


def load_decoder(cfg: DecoderConfig, state: dict[str, torch.Tensor], prefix: str = "audio_decoder.") -> CausalHiFiGANDecoder:
    """Build the decoder from `cfg` and load `prefix*` weights, strictly: a weight the config
    does not explain, or a layer without weights, means config and checkpoint disagree."""
    sub = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    if not sub:
        raise CodecLoadError(f"checkpoint has no {prefix}* weights")
    folded = fold_weight_norm(sub)
    decoder = CausalHiFiGANDecoder(cfg)
    own = decoder.state_dict()
    missing = sorted(set(own) - set(folded))
    unexpected = sorted(set(folded) - set(own))
    if missing or unexpected:
        raise CodecLoadError(
            f"decoder weights do not match the config: missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
            f"unexpected {unexpected[:5]}{'...' if len(unexpected) > 5 else ''}"
        )
    bad = [k for k in own if own[k].shape != folded[k].shape]
    if bad:
        k = bad[0]
        raise CodecLoadError(
            f"decoder weight {prefix}{k} has shape {tuple(folded[k].shape)}, config implies {tuple(own[k].shape)}"
        )
    decoder.load_state_dict(folded, strict=True)
    decoder.eval()
    for p in decoder.parameters():
        p.requires_grad_(False)
    return decoder


def nemo_state_from_decoder_shapes(
    decoder: CausalHiFiGANDecoder, generator: torch.Generator, prefix: str = "audio_decoder."
) -> dict[str, torch.Tensor]:
    """Random weights under NeMo's key names (weight norm unfolded into g, v), PyTorch-default
    scale (U(+-1/sqrt(fan_in))), so the signal stays in a sane range through ~60 layers."""
    out: dict[str, torch.Tensor] = {}
    for name, module in decoder.named_modules():
        if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)):
            w = module.weight
            fan_in = w.shape[1] * w.shape[2]
            bound = 1.0 / math.sqrt(fan_in)
            v = (torch.rand(w.shape, generator=generator) * 2 - 1) * bound
            # g != |v| on purpose: a loader that ignores g would then be caught by parity tests
            norm = v.flatten(1).norm(dim=1).view(-1, *([1] * (v.dim() - 1)))
            g = norm * (0.75 + 0.5 * torch.rand(norm.shape, generator=generator))
            out[f"{prefix}{name}.parametrizations.weight.original0"] = g
            out[f"{prefix}{name}.parametrizations.weight.original1"] = v
            assert module.bias is not None  # every conv of the decoder has one
            out[f"{prefix}{name}.bias"] = (torch.rand(module.bias.shape, generator=generator) * 2 - 1) * bound
        elif isinstance(module, Snake):
            out[f"{prefix}{name}.alpha"] = 0.5 + torch.rand(module.alpha.shape, generator=generator)
    return out


def exact_gpu_convolutions() -> None:
    """cuDNN runs fp32 convolutions in TF32 on Ampere and later unless told not to: a 10-bit
    mantissa in every conv of the decoder (and the encoder), so "exact" streaming would no longer equal the fp32
    whole decode. The codec is the process's only convolution user (the talker is matmuls), so
    switching it off process-wide costs the talker nothing; benchmarks/gpu_smoke.py measures the
    GPU decode against the CPU one."""
    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):  # the PyTorch 2.9+ switch
        conv.fp32_precision = "ieee"
    else:
        torch.backends.cudnn.allow_tf32 = False
