"""Random-weight NanoCodecs: a tiny one for tests and the tiny demo model, a full-size one for
benchmarks and NeMo parity. Both are real `.nemo` archives (NeMo key names, weight norm as
(g, v) pairs, an encoder and quantizer config) that NeMo's AudioCodecModel can restore, with the
real codec's topology: only the channel counts differ.
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path
from typing import Any

import torch

from .hifigan import CausalHiFiGANDecoder, nemo_state_from_decoder_shapes
from .native import NativeCodec, codec_topology
from .nemo_archive import write_nemo

_MODULES = "nemo.collections.tts.modules.audio_codec_modules"
_LOSSES = "nemo.collections.tts.losses.audio_codec_loss"

# The checkpoint's model_config.yaml as reconstructed in shared/docs/nanocodec-22khz-21.5fps.yaml.
# Like that file, the decoder section leaves kernel sizes and dilations to NeMo's defaults, so
# the codecs built here exercise the same default-filling a real checkpoint needs.
NANOCODEC_CONFIG: dict[str, Any] = {
    "target": "nemo.collections.tts.models.audio_codec.AudioCodecModel",
    "sample_rate": 22050,
    "samples_per_frame": 1024,
    "audio_encoder": {
        "_target_": f"{_MODULES}.HiFiGANEncoder",
        "down_sample_rates": [2, 2, 4, 8, 8],
        "encoded_dim": 32,
        "base_channels": 24,
        "activation": "lrelu",
        "pad_mode": "replicate",
    },
    "audio_decoder": {
        "_target_": f"{_MODULES}.CausalHiFiGANDecoder",
        "up_sample_rates": [8, 8, 4, 2, 2],
        "input_dim": 32,
        "base_channels": 864,
        "activation": "half_snake",
        "output_activation": "clamp",
        "pad_mode": "zeros",
        "n_groups_equal_to_out_channels": True,
    },
    "vector_quantizer": {
        "_target_": f"{_MODULES}.GroupFiniteScalarQuantizer",
        "num_groups": 8,
        "num_levels_per_group": [8, 7, 6, 6],
    },
    "commit_loss_scale": 0.0,
    "loss_resolutions": [[512, 128, 512], [1024, 256, 1024], [2048, 512, 2048]],
    "mel_loss_dims": [40, 80, 160],
    "generator_loss": {"_target_": f"{_LOSSES}.GeneratorSquaredLoss"},
    "discriminator_loss": {"_target_": f"{_LOSSES}.DiscriminatorSquaredLoss"},
}

# What a training config names: its SLM discriminator pulls microsoft/wavlm-base-plus from the
# hub when instantiated, which is why loaders must strip it (facts §4).
SLM_DISCRIMINATOR: dict[str, Any] = {
    "_target_": f"{_MODULES}.Discriminator",
    "discriminators": [
        {"_target_": f"{_MODULES}.MultiPeriodDiscriminator"},
        {
            "_target_": f"{_MODULES}.SLMDiscriminator",
            "slm_model_name": "microsoft/wavlm-base-plus",
            "slm_sr": 16000,
            "input_sr": 22050,
            "slm_hidden": 768,
            "slm_layers": 13,
            "initial_channel": 64,
        },
    ],
}

TINY_DECODER_CHANNELS = 64  # 64 -> 32 -> 16 -> 8 -> 4 -> 2: every HalfSnake still splits
TINY_ENCODER_CHANNELS = 4


def nanocodec_config(
    decoder_channels: int = 864, encoder_channels: int = 24, slm_discriminator: bool = False
) -> dict[str, Any]:
    cfg = copy.deepcopy(NANOCODEC_CONFIG)
    cfg["audio_decoder"]["base_channels"] = int(decoder_channels)
    cfg["audio_encoder"]["base_channels"] = int(encoder_channels)
    if slm_discriminator:
        cfg["discriminator"] = copy.deepcopy(SLM_DISCRIMINATOR)
    return cfg


# A PyTorch-default init (U(+-1/sqrt(fan_in))) shrinks the signal about 3x per conv, and through
# the encoder's ~60 convs a speech-level input leaves a latent of ~1e-4 that never moves off
# the FSQ's middle level. The encoder's weight-norm magnitudes are raised by this factor
# (variance-preserving for leaky ReLU) and its biases lowered, with no extra random draws, so
# the decoder's weights stay as they were; latents then span the levels and cloning tests see
# codes that move.
ENCODER_WEIGHT_GAIN = 2.45
ENCODER_BIAS_SCALE = 0.1


def _wn_conv(out: dict, key: str, shape: tuple[int, ...], gen: torch.Generator, gain: float = 1.0, bias_scale: float = 1.0) -> None:
    bound = 1.0 / math.sqrt(shape[1] * shape[2])
    v = (torch.rand(shape, generator=gen) * 2 - 1) * bound
    g = v.flatten(1).norm(dim=1).view(-1, 1, 1) * gain
    out[f"{key}.parametrizations.weight.original0"] = g
    out[f"{key}.parametrizations.weight.original1"] = v
    out[f"{key}.bias"] = (torch.rand(shape[0], generator=gen) * 2 - 1) * bound * bias_scale


def _encoder_state(enc: dict[str, Any], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Weights for NeMo's HiFiGANEncoder (non-causal, used only for voice cloning) under its
    key names; NeMo's defaults fill what the config omits."""
    if str(enc.get("activation", "lrelu")) not in ("lrelu", "elu"):
        raise ValueError("random encoder weights support parameter-free activations (lrelu, elu) only")
    base = int(enc.get("base_channels", 32))
    kernels = enc.get("resblock_kernel_sizes", (3, 7, 11))
    dilations = enc.get("resblock_dilation_sizes", (1, 3, 5))
    out: dict[str, torch.Tensor] = {}
    p = "audio_encoder."
    conv = functools.partial(_wn_conv, gain=ENCODER_WEIGHT_GAIN, bias_scale=ENCODER_BIAS_SCALE)
    conv(out, p + "pre_conv.conv", (base, 1, int(enc.get("in_kernel_size", 7))), gen)
    ch = base
    for i, rate in enumerate(enc.get("down_sample_rates", (2, 2, 8, 8))):
        for j, k in enumerate(kernels):
            for m, _ in enumerate(dilations):
                blk = f"{p}res_layers.{i}.res_blocks.{j}.res_blocks.{m}"
                conv(out, f"{blk}.input_conv.conv", (ch, ch, k), gen)
                conv(out, f"{blk}.skip_conv.conv", (ch, ch, k), gen)
        conv(out, f"{p}down_sample_conv_layers.{i}.conv", (2 * ch, ch, 2 * rate), gen)
        ch *= 2
    conv(out, p + "post_conv.conv", (int(enc["encoded_dim"]), ch, int(enc.get("out_kernel_size", 7))), gen)
    return out


def _quantizer_state(vq: dict[str, Any]) -> dict[str, torch.Tensor]:
    # NeMo registers these as persistent buffers, so its own checkpoints carry them.
    levels = [int(x) for x in vq["num_levels_per_group"]]
    base = torch.cumprod(torch.tensor([1] + levels[:-1]), dim=0).to(torch.int32).view(1, -1, 1)
    lv = torch.tensor(levels, dtype=torch.int32).view(1, -1, 1)
    out = {}
    for g in range(int(vq["num_groups"])):
        out[f"vector_quantizer.fsqs.{g}.dim_base_index"] = base.clone()
        out[f"vector_quantizer.fsqs.{g}.num_levels"] = lv.clone()
    return out


def random_codec_state(config: dict[str, Any], seed: int = 0) -> dict[str, torch.Tensor]:
    """A full `model_weights.ckpt` for `config`: encoder, quantizer buffers, decoder."""
    gen = torch.Generator().manual_seed(int(seed))
    dec_cfg, _, _, _ = codec_topology(config)
    state = _encoder_state(config["audio_encoder"], gen)
    state.update(_quantizer_state(config["vector_quantizer"]))
    state.update(nemo_state_from_decoder_shapes(CausalHiFiGANDecoder(dec_cfg), gen))
    if config.get("discriminator"):
        # A token stand-in for the trained discriminator weights a real checkpoint carries:
        # loaders must skip them.
        _wn_conv(state, "discriminator.discriminators.0.discriminators.0.conv_layers.0.conv", (4, 1, 5), gen)
    return state


def write_random_codec(
    path: Path, seed: int = 0, decoder_channels: int = 864, encoder_channels: int = 24, slm_discriminator: bool = False
) -> Path:
    """A random codec `.nemo`; with slm_discriminator its config names the hub-bound SLM discriminator."""
    config = nanocodec_config(decoder_channels, encoder_channels, slm_discriminator)
    return write_nemo(Path(path), config, random_codec_state(config, seed))


def make_tiny_codec(path: Path, seed: int = 0) -> Path:
    """Write the tiny random NanoCodec (real topology, 64 base channels) as a `.nemo` at `path`."""
    return write_random_codec(path, seed, TINY_DECODER_CHANNELS, TINY_ENCODER_CHANNELS)


def build_random_codec(
    seed: int = 0,
    decoder_channels: int = 864,
    path: Path | None = None,
    device: str = "cpu",
    encoder_channels: int = TINY_ENCODER_CHANNELS,
) -> NativeCodec:
    """A random NanoCodec of the given width (full size by default), loaded by the native backend.

    The same seed gives the same weights in memory and on disk; with `path` the `.nemo` is also
    written there (for NeMo parity or a benchmark that wants a file).
    """
    config = nanocodec_config(decoder_channels, encoder_channels)
    state = random_codec_state(config, seed)
    source = f"<random seed={seed} channels={decoder_channels}>"
    if path is not None:
        write_nemo(Path(path), config, state)
        source = str(path)
    return NativeCodec.from_archive(config, state, source=source, device=device)
