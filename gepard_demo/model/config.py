"""Typed view of a Gepard checkpoint's two config files (facts §1).

`config.json` is the bare Qwen3.5 backbone (`model_type: qwen3_5_text`); the sidecar
`gepard_config.json` carries everything audio. A field missing from the sidecar takes the
published default, so an older or trimmed sidecar still loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gepard_demo.declare import values_of
from gepard_demo.settings import SamplingSettings

if TYPE_CHECKING:  # transformers is imported where a backbone config is built: the text rules
    # (text_input -> prompt -> here) serve thin clients (app --server-url, eval's served engine)
    # that load no model, and importing transformers costs them ~8 s on this CPU.
    from transformers import Qwen3_5TextConfig

BACKBONE_MODEL_TYPE = "qwen3_5_text"
# Template leftovers in the sidecar's backbone_config; the model uses plain 1D RoPE.
_MROPE_KEYS = ("mrope_section", "mrope_interleaved")
# The sampling settings gepard_config.json carries at its top level (SamplingSettings fields, by
# the same names). A key the sidecar leaves out takes the setting's declared default (its
# `setting(...)` in settings.py), which is also what the published checkpoint ships: the defaults
# live there alone, so a changed default changes the operating point with it.
SIDECAR_SAMPLING_KEYS = ("stop_threshold", "temperature", "max_frames")
OPERATING_POINT = values_of(SamplingSettings(), SIDECAR_SAMPLING_KEYS)


def full_attention_layers(backbone: Qwen3_5TextConfig) -> int:
    """The backbone's layers that keep keys and values (the rest, Gated DeltaNet, keep fixed states).
    transformers fills `layer_types` when the config is made; its type says Optional."""
    return list(backbone.layer_types or ()).count("full_attention")


class ConfigError(ValueError):
    """A checkpoint's config files are missing or do not describe a Gepard model."""


@dataclass(frozen=True)
class SpecialTokens:
    start_of_text: int = 248073
    end_of_text: int = 248074
    start_of_speech: int = 248070
    end_of_speech: int = 248071
    tts_pad: int = 248076
    # First speaker-slot id: slots are tokeniser_length + i.
    tokeniser_length: int = 248077


@dataclass(frozen=True)
class TextRepetition:
    enabled: bool = True
    target_text_tokens: int = 16
    apply_below: int = 13
    max_repeats: int = 8


@dataclass(frozen=True)
class CodecSettings:
    codec_id: str = "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"
    sample_rate: int = 22050
    frame_rate_hz: float = 21.5
    fsq_levels: tuple[int, ...] = (8, 7, 6, 6)
    num_groups: int = 8
    do_unfold: bool = True


@dataclass(frozen=True)
class GepardConfig:
    backbone: Qwen3_5TextConfig
    audio_head_levels: tuple[int, ...] = (8, 7, 6, 6) * 8
    audio_embed_dim: int = 32
    special_tokens: SpecialTokens = field(default_factory=SpecialTokens)
    text_repetition: TextRepetition = field(default_factory=TextRepetition)
    codec: CodecSettings = field(default_factory=CodecSettings)
    num_speaker_prefix: int = 8
    # Authoritative rotary coverage (gepard_config.json top level, default 1.0): forced into
    # both the flat and the nested rope copies of the backbone config.
    partial_rotary_factor: float = 1.0
    voice_cloning: bool = False  # the sidecar says the checkpoint carries a ref_compressor
    # The sampling settings the sidecar publishes (SamplingSettings fields; vLLM-Omni fixes them at
    # its start): the checkpoint's own operating point.
    operating_point: dict = field(default_factory=lambda: dict(OPERATING_POINT))

    @property
    def num_heads(self) -> int:
        return len(self.audio_head_levels)

    @property
    def hidden_size(self) -> int:
        return self.backbone.hidden_size

    @property
    def speaker_token_base(self) -> int:
        return self.special_tokens.tokeniser_length

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> "GepardConfig":
        model_dir = Path(model_dir)
        backbone = _read_json(model_dir / "config.json")
        sidecar_path = model_dir / "gepard_config.json"
        sidecar = _read_json(sidecar_path) if sidecar_path.exists() else {}
        return cls.from_dicts(backbone, sidecar)

    @classmethod
    def from_dicts(cls, backbone: dict, sidecar: dict) -> "GepardConfig":
        # config.json is authoritative for the backbone: it is what the weights were saved with.
        bb = dict(sidecar.get("backbone_config") or {})
        bb.update(backbone)
        if bb.get("model_type", BACKBONE_MODEL_TYPE) != BACKBONE_MODEL_TYPE:
            raise ConfigError(
                f"config.json has model_type {bb.get('model_type')!r}; a Gepard checkpoint's "
                f"config.json is the bare backbone ({BACKBONE_MODEL_TYPE!r})"
            )
        bb.pop("model_type", None)
        bb.pop("architectures", None)
        rotary = float(sidecar.get("partial_rotary_factor", 1.0))
        backbone_cfg = _backbone_config(bb, rotary)

        heads = sidecar.get("audio_heads")
        levels = (
            tuple(int(heads[k]) for k in sorted(heads, key=lambda s: int(str(s).rsplit("_", 1)[-1])))
            if heads
            else cls.audio_head_levels
        )
        codec = dict(sidecar.get("codec") or {})
        fsq = codec.get("fsq_levels", [8, 7, 6, 6])
        # The sidecar nests the per-group levels once more ([[8, 7, 6, 6]]).
        if fsq and isinstance(fsq[0], (list, tuple)):
            fsq = fsq[0]
        codec_settings = CodecSettings(
            codec_id=codec.get("codec_id", CodecSettings.codec_id),
            sample_rate=int(codec.get("sample_rate", CodecSettings.sample_rate)),
            frame_rate_hz=float(codec.get("frame_rate_hz", CodecSettings.frame_rate_hz)),
            fsq_levels=tuple(int(x) for x in fsq),
            num_groups=int(codec.get("num_layers", CodecSettings.num_groups)),
            do_unfold=bool(codec.get("do_unfold", CodecSettings.do_unfold)),
        )
        if len(codec_settings.fsq_levels) * codec_settings.num_groups != len(levels):
            raise ConfigError(
                f"{len(levels)} audio heads do not match the codec's {codec_settings.num_groups} groups "
                f"x {len(codec_settings.fsq_levels)} FSQ dims"
            )
        compressor = ((sidecar.get("voice_cloning") or {}).get("compressor") or {})
        return cls(
            backbone=backbone_cfg,
            audio_head_levels=levels,
            audio_embed_dim=int(sidecar.get("audio_embed_dim", 32)),
            special_tokens=_pick(SpecialTokens, sidecar.get("special_tokens")),
            text_repetition=_pick(TextRepetition, sidecar.get("text_repetition")),
            codec=codec_settings,
            num_speaker_prefix=int(compressor.get("num_queries", 8)),
            partial_rotary_factor=rotary,
            voice_cloning=bool((sidecar.get("voice_cloning") or {}).get("enabled", False)),
            operating_point={k: type(v)(sidecar.get(k, v)) for k, v in OPERATING_POINT.items()},
        )


def _backbone_config(bb: dict, rotary: float) -> Qwen3_5TextConfig:
    """The backbone config with `rotary` forced into BOTH rope copies, as the authors load it.

    transformers 5.x computes RoPE from the nested `rope_parameters` copy and vLLM reads the
    flat one; the stock backbone ships them diverged (flat 0.25, nested 1.0 or absent), and an
    absent nested copy would silently fall back to the flat 0.25 here. So neither copy in
    config.json is trusted: the sidecar's value goes into both, before the backbone is built.
    """
    bb = dict(bb)
    rope = dict(bb.get("rope_parameters") or {})
    rope = {k: v for k, v in rope.items() if k not in _MROPE_KEYS}
    rope.setdefault("rope_type", "default")
    if "rope_theta" not in rope and "rope_theta" in bb:
        rope["rope_theta"] = bb["rope_theta"]
    rope["partial_rotary_factor"] = rotary
    bb["rope_parameters"] = rope
    bb["partial_rotary_factor"] = rotary
    from transformers import Qwen3_5TextConfig

    cfg = Qwen3_5TextConfig(**bb)
    # Whatever the constructor's standardisation did, both copies now say `rotary`.
    cfg.partial_rotary_factor = rotary
    cfg.rope_parameters = {**(cfg.rope_parameters or {}), "partial_rotary_factor": rotary}
    return cfg


def _pick(kind, values: dict | None):
    """Build a settings dataclass from the sidecar section, ignoring unknown keys."""
    values = values or {}
    names = kind.__dataclass_fields__
    return kind(**{k: type(getattr(kind, k))(v) for k, v in values.items() if k in names})


def _read_json(path: Path) -> dict:
    if not path.exists():
        raise ConfigError(f"{path} not found: a Gepard checkpoint needs config.json and gepard_config.json")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
