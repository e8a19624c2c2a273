"""A random-weight talker with Gepard-1.0's real shape, built in memory (facts §1).

14 full-attention layers, hidden 1024, 8 attention heads, 2 KV heads, head_dim 256,
intermediate 3584, vocab 248320, rope_theta 1e7, full rotary: about 0.5B parameters. It makes
noise; it exists to measure what the real model costs per frame (benchmarks, `--full-size`)
without the weights. A tokenizer directory is needed only to turn text into ids (the tiny
checkpoint's is enough: its ids are valid in the full vocabulary).

    engine = build_full_size_engine(ensure_tiny(cache_dir), dtype=torch.float32)
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer

from gepard_demo.model.config import GepardConfig
from gepard_demo.model.engine import DTYPES, GepardEngine, ModelInfo
from gepard_demo.model.talker import GepardTalker

FULL_SIZE_NAME = "full-size-random"
# Gepard-1.0's backbone: nineninesix/qwen3_5-full-attn-only-14 (facts §1).
FULL_BACKBONE = dict(
    model_type="qwen3_5_text",
    vocab_size=248320,
    hidden_size=1024,
    intermediate_size=3584,
    num_hidden_layers=14,
    layer_types=["full_attention"] * 14,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=256,
    max_position_embeddings=32768,
    rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 1.0},
    tie_word_embeddings=False,
)
FULL_SIDECAR = {"partial_rotary_factor": 1.0, "voice_cloning": {"enabled": True, "compressor": {"num_queries": 8}}}


def full_size_config() -> GepardConfig:
    """The published defaults (special tokens, 32 heads, 8 speaker slots) on the real backbone."""
    return GepardConfig.from_dicts(dict(FULL_BACKBONE), dict(FULL_SIDECAR))


def build_full_size_engine(
    tokenizer_dir: str | Path,
    dtype: torch.dtype | str = torch.float32,
    device: str = "cpu",
    seed: int = 0,
) -> GepardEngine:
    """A GepardEngine over a random full-size talker (about 2 GB in fp32; 10-20 s to build)."""
    if isinstance(dtype, str):
        dtype = DTYPES[dtype]
    config = full_size_config()
    torch.manual_seed(seed)
    talker = GepardTalker(config)
    with torch.no_grad():
        talker.null_prefix.normal_(0.0, 0.02)
        talker.audio_embed_scale.fill_(0.02)  # about the text-embedding std, as the authors set it
    talker = talker.set_backbone_dtype(dtype).to(device=device).requires_grad_(False).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    info = ModelInfo(FULL_SIZE_NAME, "(in memory)", None, True, str(device), str(dtype).removeprefix("torch."))
    return GepardEngine(config, tokenizer, talker, info)
