"""The Gepard talker: a Qwen3.5 backbone fed with input embeddings, 32 FSQ codebook heads,
a binary stop head, and the audio-frame embedding that feeds each frame back (facts §1, §3).

Attribute names mirror the checkpoint's weight names (`model.*`, `codebook_heads.i`,
`stop_head`, `audio_embeddings.i`, `audio_embed_proj`, `audio_embed_scale`, `null_prefix`),
so loading is a plain state-dict load with an explicit key check.

What the loader accepts (README "Models"): any one-element tensor into a one-element parameter
whatever its shape ([] or [1]: the authors' model declares `audio_embed_scale` as [1], older
files hold 0-dim); any floating dtype on disk (the authors upload bf16) cast to the module's
dtype; a checkpoint without `null_prefix` (trained without voice cloning) runs with no speaker
slots, the layout it was trained with. Every other missing, unexpected or misshapen key fails
with its name.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import cast

import torch
from safetensors import safe_open
from safetensors.torch import load_file
from torch import nn
from transformers import Qwen3_5TextModel

from .attention import use_gepard_attention
from .config import GepardConfig

# Present in training checkpoints, never used at inference.
TRAINING_ONLY_PREFIXES = ("aligner.", "supcon_head.", "mtp.")
# The voice-cloning compressor is not part of the talker: voice.speaker_prefix.SpeakerPrefixer loads
# these weights itself (only when a reference voice is used), so the talker skips them.
CLONING_PREFIXES = ("ref_compressor.",)
# The backbone's LM head predicts text tokens; a TTS step never reads it.
UNUSED_PREFIXES = ("lm_head.",)


class CheckpointError(RuntimeError):
    """The weights on disk do not match the model the config describes."""


class GepardTalker(nn.Module):
    # The buffers __init__ registers, typed (nn.Module's attribute lookup says Tensor | Module).
    _head_gather: torch.Tensor
    _head_pad: torch.Tensor
    _embed_offsets: torch.Tensor

    def __init__(self, config: GepardConfig):
        super().__init__()
        self.config = config
        hidden = config.hidden_size
        levels = list(config.audio_head_levels)
        use_gepard_attention(config.backbone)  # grouped attention for padded batches on a CPU (attention.py)
        self.model = Qwen3_5TextModel(config.backbone)
        self.codebook_heads = nn.ModuleList(nn.Linear(hidden, n) for n in levels)
        self.stop_head = nn.Linear(hidden, 1)
        self.audio_embeddings = nn.ModuleList(nn.Embedding(n, config.audio_embed_dim) for n in levels)
        self.audio_embed_proj = nn.Sequential(
            nn.Linear(len(levels) * config.audio_embed_dim, hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.LayerNorm(hidden, elementwise_affine=False),
        )
        # A frozen one-element parameter of shape [1], as the authors declare it.
        self.audio_embed_scale = nn.Parameter(torch.ones(1), requires_grad=False)
        if config.num_speaker_prefix > 0:
            self.null_prefix = nn.Parameter(torch.zeros(config.num_speaker_prefix, hidden))
        else:  # trained without voice cloning: no speaker slots at all
            self.register_parameter("null_prefix", None)

        # All 32 heads as one matmul, then gathered into a padded (heads, max_level) grid.
        # Padding slots get -inf so neither argmax nor top-k can pick them.
        max_level = max(levels)
        gather = torch.zeros(len(levels), max_level, dtype=torch.long)
        pad = torch.zeros(len(levels), max_level)
        offset = 0
        for i, n in enumerate(levels):
            gather[i, :n] = torch.arange(offset, offset + n)
            gather[i, n:] = offset
            pad[i, n:] = float("-inf")
            offset += n
        self.register_buffer("_head_gather", gather, persistent=False)
        self.register_buffer("_head_pad", pad, persistent=False)
        self.register_buffer("_embed_offsets", torch.tensor([0, *levels[:-1]]).cumsum(0), persistent=False)
        self._fused: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    # -- weights -------------------------------------------------------------------------

    def load_checkpoint(self, model_dir: str | Path) -> None:
        """Load `model.safetensors` (or its shards) with an explicit key check.

        Training-only and LM-head weights are skipped; anything else the model does not
        expect, and anything it expects but the files lack, fails with the key names.
        """
        state = read_safetensors(Path(model_dir))
        skipped = TRAINING_ONLY_PREFIXES + CLONING_PREFIXES + UNUSED_PREFIXES
        state = {k: v for k, v in state.items() if not k.startswith(skipped)}
        expected = set(self.state_dict().keys())
        missing = sorted(expected - state.keys())
        unexpected = sorted(state.keys() - expected)
        if missing or unexpected:
            parts = []
            if missing:
                parts.append(f"missing keys ({len(missing)}): {', '.join(missing[:20])}")
            if unexpected:
                parts.append(f"unexpected keys ({len(unexpected)}): {', '.join(unexpected[:20])}")
            raise CheckpointError(f"checkpoint in {model_dir} does not match the config: " + "; ".join(parts))
        mine = self.state_dict()
        # One element into one element, whatever the shapes ([] vs [1]): they broadcast alike.
        state = {k: v.reshape(mine[k].shape) if v.numel() == 1 == mine[k].numel() else v for k, v in state.items()}
        bad_shapes = [f"{k} {tuple(v.shape)} != {tuple(mine[k].shape)}" for k, v in state.items() if v.shape != mine[k].shape]
        if bad_shapes:
            raise CheckpointError(f"checkpoint in {model_dir} has wrong shapes: {'; '.join(bad_shapes[:10])}")
        self.load_state_dict(state, strict=True)
        self._fused = None

    def fused(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The 32 heads as one weight + bias, and the 32 embedding tables as one table.

        One matmul and one lookup per step instead of 32 each: at batch 1 a step is mostly
        small-op overhead. Built lazily (after loading and after .to()) so the fused copies
        always match the module's own weights; `load_checkpoint` and `_apply` reset them.
        """
        if self._fused is None:
            heads = [cast(nn.Linear, h) for h in self.codebook_heads]
            weight = torch.cat([h.weight for h in heads], dim=0).detach()
            bias = torch.cat([h.bias for h in heads], dim=0).detach()
            table = torch.cat([cast(nn.Embedding, e).weight for e in self.audio_embeddings], dim=0).detach()
            self._fused = (weight, bias, table)
        return self._fused

    def _apply(self, fn, *args, **kwargs):
        # .to(device/dtype) makes new tensors; drop fused copies of the old ones.
        self._fused = None
        return super()._apply(fn, *args, **kwargs)

    @property
    def device(self) -> torch.device:
        return self.stop_head.weight.device

    # -- precision --------------------------------------------------------------------------

    @property
    def backbone_dtype(self) -> torch.dtype:
        """What the Qwen3.5 layers compute in (bf16 or fp16 on a GPU; fp32 on a CPU, where the
        speed layer's fbgemm linears keep fp32 math)."""
        return self.model.norm.weight.dtype

    def set_backbone_dtype(self, dtype: torch.dtype) -> "GepardTalker":
        """Cast the backbone's layers and final norm to `dtype`; everything that decides a
        sample stays fp32: the token embeddings, the 32 codebook heads, the stop head, the frame
        embedding, the speaker slots. A bf16 stop head moves p_stop by up to 0.017 on the
        real-shape model (the fidelity guard's bound is 0.01), so only the layers go down."""
        self.model.layers.to(dtype)
        self.model.norm.to(dtype)
        return self

    def backbone(self, embeds: torch.Tensor, *, attention_mask=None, position_ids=None, past_key_values=None,
                 last_only: bool = True) -> torch.Tensor:
        """fp32 input embeddings -> fp32 hidden states (the last position's unless `last_only`
        is False), through the layers at `backbone_dtype`. attention_mask: as decode_batch
        builds it (None, a 2-D padding mask, or the full-attention mask mapping)."""
        out = self.model(inputs_embeds=embeds.to(self.backbone_dtype), attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=past_key_values,
                         use_cache=past_key_values is not None)
        hidden = out.last_hidden_state
        return (hidden[:, -1] if last_only else hidden).float()

    # -- the three things a decode step needs ---------------------------------------------

    def embed_prompt(self, input_ids: torch.Tensor, speakers: torch.Tensor | None = None) -> torch.Tensor:
        """Token embeddings, with the speaker slots replaced by a speaker prefix.

        speakers: (N, K, hidden), one prefix per row (a reference voice's compressor output, or
        `null_prefix` for the default voice); None = `null_prefix` on every row.
        """
        embeds = self.model.embed_tokens(input_ids)
        if self.null_prefix is None:
            return embeds
        base = self.config.speaker_token_base
        slots = (input_ids >= base) & (input_ids < base + self.config.num_speaker_prefix)
        if bool(slots.any()):
            embeds = embeds.clone()
            slot = input_ids[slots] - base
            if speakers is None:
                embeds[slots] = self.null_prefix[slot].to(embeds.dtype)
            else:
                row = slots.nonzero()[:, 0]
                embeds[slots] = speakers[row, slot].to(embeds.dtype)
        return embeds

    def embed_frame(self, codes: torch.Tensor) -> torch.Tensor:
        """(N, 32) codes -> (N, hidden): the next step's input embedding."""
        table = self.fused()[2]
        parts = torch.nn.functional.embedding(codes + self._embed_offsets, table)  # (N, 32, dim)
        return self.audio_embed_proj(parts.flatten(1)) * self.audio_embed_scale

    @property
    def logits_shape(self) -> torch.Size:
        """(heads, max_level): one frame's padded logits, and the noise a sampled frame draws."""
        return self._head_pad.shape

    def head_logits(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N, hidden) -> logits (N, 32, max_level) in fp32 with -inf padding, p_stop (N,)."""
        weight, bias, _ = self.fused()
        hidden = hidden.to(weight.dtype)  # the heads are fp32 whatever the backbone computes in
        flat = torch.nn.functional.linear(hidden, weight, bias).float()
        logits = flat[:, self._head_gather] + self._head_pad
        p_stop = torch.sigmoid(self.stop_head(hidden).float()).squeeze(-1)
        return logits, p_stop


def config_for_checkpoint(config: GepardConfig, model_dir: str | Path) -> GepardConfig:
    """The config with the speaker-slot count the weights were trained with.

    A checkpoint whose training had voice cloning off has no `null_prefix` and saw no prefix
    (facts §2), so it gets K=0 slots; otherwise K is `null_prefix`'s first dimension.
    """
    shapes = checkpoint_shapes(Path(model_dir))
    slots = shapes["null_prefix"][0] if "null_prefix" in shapes else 0
    if slots != config.num_speaker_prefix:
        config = dataclasses.replace(config, num_speaker_prefix=slots)
    return config


def checkpoint_shapes(model_dir: Path) -> dict[str, tuple[int, ...]]:
    """Key -> shape of every tensor on disk, read from the headers only."""
    shapes: dict[str, tuple[int, ...]] = {}
    for path in _safetensors_files(model_dir):
        with safe_open(str(path), framework="pt") as f:
            for key in f.keys():
                shapes[key] = tuple(f.get_slice(key).get_shape())
    return shapes


def _safetensors_files(model_dir: Path) -> list[Path]:
    single = model_dir / "model.safetensors"
    index = model_dir / "model.safetensors.index.json"
    if single.exists():
        return [single]
    if index.exists():
        return [model_dir / s for s in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    raise CheckpointError(f"no model.safetensors or model.safetensors.index.json in {model_dir}")


def read_safetensors(model_dir: Path) -> dict[str, torch.Tensor]:
    """One `model.safetensors`, or the shards its `model.safetensors.index.json` lists."""
    state: dict[str, torch.Tensor] = {}
    for path in _safetensors_files(model_dir):
        state.update(load_file(str(path)))
    return state
