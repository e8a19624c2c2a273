"""NanoCodec's audio encoder without NeMo: NeMo's HiFiGANEncoder (non-causal) + GroupFSQ.

Used only for voice cloning: reference audio (mono, the codec's rate) -> the 32 per-dim codes
per frame the speaker compressor takes (facts §9). The module tree mirrors NeMo's attribute
names (pre_conv.conv, res_layers.i.res_blocks.j.res_blocks.k.{input,skip}_conv.conv,
activations.i.activation, down_sample_conv_layers.i.conv, post_conv.conv), so a `.nemo`'s
`audio_encoder.*` weights load with a strict key check once weight norm is folded.

As NeMo's AudioCodecModel.encode: the audio is zero-padded to whole frames; every conv pads
both sides with the config's pad_mode (NeMo's Conv1dNorm), and its output is zeroed past each
item's length, so a batch of different lengths gives each item what it gets alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, cast, get_args

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from .errors import CodecLoadError
from .fsq import FSQLayout, Quantized, quantize
from .hifigan import Activation, exact_gpu_convolutions, fold_weight_norm
from .nemo_archive import read_nemo

PadMode = Literal["zeros", "reflect", "replicate", "circular"]  # nn.Conv1d's padding modes
PAD_MODES: tuple[PadMode, ...] = get_args(PadMode)


@dataclass(frozen=True)
class EncoderConfig:
    """HiFiGANEncoder's constructor arguments; defaults are NeMo 3.0's, for keys a yaml omits."""

    encoded_dim: int
    down_sample_rates: tuple[int, ...] = (2, 2, 8, 8)
    base_channels: int = 32
    in_kernel_size: int = 7
    out_kernel_size: int = 7
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[int, ...] = (1, 3, 5)
    activation: str = "lrelu"
    pad_mode: str = "reflect"

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.down_sample_rates)

    @classmethod
    def from_config(cls, enc: dict[str, Any] | None) -> "EncoderConfig":
        if not enc:
            raise CodecLoadError("codec config has no audio_encoder section: this codec cannot encode references")
        enc = dict(enc)
        target = str(enc.pop("_target_", ""))
        if not target.endswith(".HiFiGANEncoder"):
            raise CodecLoadError(f"audio_encoder is {target!r}; the native encoder implements HiFiGANEncoder only")
        unknown = sorted(set(enc) - {f.name for f in fields(cls)})
        if unknown:
            raise CodecLoadError(f"audio_encoder has arguments the native encoder does not know: {unknown}")
        if "encoded_dim" not in enc:
            raise CodecLoadError("audio_encoder.encoded_dim is missing")
        for key in ("down_sample_rates", "resblock_kernel_sizes", "resblock_dilation_sizes"):
            if key in enc:
                enc[key] = tuple(int(v) for v in enc[key])
        for key in ("encoded_dim", "base_channels", "in_kernel_size", "out_kernel_size"):
            if key in enc:
                enc[key] = int(enc[key])
        cfg = cls(**enc)
        if cfg.pad_mode not in PAD_MODES:
            raise CodecLoadError(f"audio_encoder.pad_mode {cfg.pad_mode!r} is not a Conv1d padding mode")
        return cfg


class MaskedConv(nn.Module):
    """NeMo's Conv1dNorm with weight norm folded: conv with symmetric padding, then zero past the length."""

    def __init__(self, cin: int, cout: int, kernel: int, pad_mode: str, stride: int = 1, dilation: int = 1, padding: int | None = None):
        super().__init__()
        if not padding:  # NeMo's own test: 0 or None mean "same" padding
            padding = (kernel * dilation - dilation) // 2
        self.conv = nn.Conv1d(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, padding_mode=cast(PadMode, pad_mode))  # checked against PAD_MODES when read

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return _mask(self.conv(x), lengths)


def _mask(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    keep = torch.arange(x.shape[-1], device=x.device).view(1, 1, -1) < lengths.view(-1, 1, 1)
    return x * keep


class ResidualBlock(nn.Module):
    def __init__(self, channels: int, kernel: int, dilation: int, activation: str, pad_mode: str):
        super().__init__()
        self.input_activation = Activation(activation, channels)
        self.skip_activation = Activation(activation, channels)
        self.input_conv = MaskedConv(channels, channels, kernel, pad_mode, dilation=dilation)
        self.skip_conv = MaskedConv(channels, channels, kernel, pad_mode)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        h = self.input_conv(self.input_activation(x), lengths)
        return x + self.skip_conv(self.skip_activation(h), lengths)


class ResBlockChain(nn.Module):
    def __init__(self, channels: int, kernel: int, dilations: tuple[int, ...], activation: str, pad_mode: str):
        super().__init__()
        self.res_blocks = nn.ModuleList(ResidualBlock(channels, kernel, d, activation, pad_mode) for d in dilations)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        for block in self.res_blocks:
            x = block(x, lengths)
        return x


class ResLayer(nn.Module):
    """The mean of one chain per kernel size (NeMo's HiFiGANResLayer)."""

    def __init__(self, channels: int, cfg: EncoderConfig):
        super().__init__()
        self.res_blocks = nn.ModuleList(
            ResBlockChain(channels, k, cfg.resblock_dilation_sizes, cfg.activation, cfg.pad_mode)
            for k in cfg.resblock_kernel_sizes
        )

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        outs = [chain(x, lengths) for chain in self.res_blocks]
        return sum(outs) / len(outs)


class HiFiGANEncoder(nn.Module):
    """(B, samples) audio + lengths -> (B, encoded_dim, frames) latent + frame lengths."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.cfg = cfg
        self.pre_conv = MaskedConv(1, cfg.base_channels, cfg.in_kernel_size, cfg.pad_mode)
        self.activations = nn.ModuleList()
        self.down_sample_conv_layers = nn.ModuleList()
        self.res_layers = nn.ModuleList()
        ch = cfg.base_channels
        for rate in cfg.down_sample_rates:
            self.res_layers.append(ResLayer(ch, cfg))
            self.activations.append(Activation(cfg.activation, ch))
            kernel = 2 * rate
            self.down_sample_conv_layers.append(
                MaskedConv(ch, 2 * ch, kernel, cfg.pad_mode, stride=rate, padding=(kernel - rate + 1) // 2)
            )
            ch *= 2
        self.post_activation = Activation(cfg.activation, ch)
        self.post_conv = MaskedConv(ch, cfg.encoded_dim, cfg.out_kernel_size, cfg.pad_mode)

    def forward(self, audio: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.pre_conv(audio.unsqueeze(1), lengths)
        for res, act, down, rate in zip(self.res_layers, self.activations, self.down_sample_conv_layers, self.cfg.down_sample_rates):
            h = act(res(h, lengths))
            lengths = lengths // rate
            h = down(h, lengths)
        return self.post_conv(self.post_activation(h), lengths), lengths


def load_encoder(cfg: EncoderConfig, state: dict[str, torch.Tensor], prefix: str = "audio_encoder.") -> HiFiGANEncoder:
    """Build the encoder and load `prefix*` weights strictly (weight norm folded as NeMo computes it)."""
    sub = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    if not sub:
        raise CodecLoadError(f"codec checkpoint has no {prefix}* weights: it cannot encode references")
    folded = fold_weight_norm(sub)
    encoder = HiFiGANEncoder(cfg)
    own = encoder.state_dict()
    missing, unexpected = sorted(set(own) - set(folded)), sorted(set(folded) - set(own))
    if missing or unexpected:
        raise CodecLoadError(f"encoder weights do not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    bad = [k for k in own if own[k].shape != folded[k].shape]
    if bad:
        raise CodecLoadError(f"encoder weight {prefix}{bad[0]} has shape {tuple(folded[bad[0]].shape)}, config implies {tuple(own[bad[0]].shape)}")
    encoder.load_state_dict(folded, strict=True)
    encoder.eval()
    for p in encoder.parameters():
        p.requires_grad_(False)
    return encoder


class CodecEncoder:
    """Audio at the codec's rate -> (T, 32) per-dim codes, as NeMo's `encode` then unfolded."""

    def __init__(self, encoder: HiFiGANEncoder, layout: FSQLayout, sample_rate: int, source: str = "<memory>", device: str | torch.device = "cpu"):
        if layout.num_codes != encoder.cfg.encoded_dim:
            raise CodecLoadError(f"quantizer takes {layout.num_codes} dims but audio_encoder.encoded_dim is {encoder.cfg.encoded_dim}")
        if torch.device(device).type == "cuda":
            exact_gpu_convolutions()
        self.encoder = encoder.to(device)
        self.layout = layout
        self.sample_rate = int(sample_rate)
        self.samples_per_frame = encoder.cfg.samples_per_frame
        self.source = source

    @property
    def device(self) -> torch.device:
        """Where the encoder's weights are now (ZeroGPU moves them into a GPU call's worker)."""
        return next(self.encoder.parameters()).device

    @classmethod
    def from_archive(cls, config: dict[str, Any], state: dict[str, torch.Tensor], source: str = "<memory>", device: str | torch.device = "cpu") -> "CodecEncoder":
        cfg = EncoderConfig.from_config(config.get("audio_encoder"))
        layout = FSQLayout.from_config(config.get("vector_quantizer"))
        try:
            sample_rate = int(config["sample_rate"])
        except KeyError as e:
            raise CodecLoadError("codec config has no sample_rate") from e
        spf = int(config.get("samples_per_frame", cfg.samples_per_frame))
        if spf != cfg.samples_per_frame:
            raise CodecLoadError(f"samples_per_frame {spf} != product of down_sample_rates {cfg.down_sample_rates}")
        return cls(load_encoder(cfg, state), layout, sample_rate, source=source, device=device)

    @classmethod
    def from_nemo(cls, path: str | Path, device: str | torch.device = "cpu") -> "CodecEncoder":
        archive = read_nemo(Path(path), prefixes=("audio_encoder.",))
        return cls.from_archive(archive.config, archive.state_dict, source=str(path), device=device)

    def encode_quantized(self, audio: np.ndarray | torch.Tensor) -> Quantized:
        """Mono float audio (samples,) at `sample_rate` -> Quantized with a batch of one."""
        x = torch.as_tensor(np.asarray(audio, dtype=np.float32)).to(self.device)
        if x.dim() != 1 or x.numel() == 0:
            raise ValueError(f"audio must be a non-empty mono signal (samples,), got shape {tuple(x.shape)}")
        spf = self.samples_per_frame
        frames = math.ceil(x.numel() / spf)
        x = F.pad(x, (0, frames * spf - x.numel())).unsqueeze(0)  # whole frames, as NeMo's pad_audio
        with torch.inference_mode():
            latent, _ = self.encoder(x, torch.tensor([x.shape[1]], device=self.device))
            return quantize(latent, self.layout)

    def encode(self, audio: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Mono float audio (samples,) -> (T, 32) LongTensor of per-dim codes, T = ceil(samples / spf)."""
        return self.encode_quantized(audio).codes[0].cpu()
