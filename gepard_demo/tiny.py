"""A tiny Gepard checkpoint in exactly the published layout, with random weights.

Real checkpoints cannot be downloaded here, so tests and the offline demo load this one through
the same code path as the real model: `config.json` (qwen3_5_text, both linear and full attention
layers), `gepard_config.json`, `model.safetensors` with the real key names (plus a few
training-only ones the loader must skip), a byte-level BPE tokenizer trained here, and a tiny
NanoCodec `.nemo` beside them. Its audio is noise, and its config says so (`random_weights`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3_5TextConfig

from .config import GepardConfig

TINY_VERSION = "tiny-v1"
TINY_CODEC_FILE = "nemo-nano-codec-tiny.nemo"
TEXT_VOCAB = 512
# The real special ids sit just past the text vocabulary (SOS 248070 ... tokeniser_length
# 248077); the tiny ones keep the same offsets from 600.
SPECIAL_BASE = 600
SPECIAL_TOKENS = {
    "start_of_speech": SPECIAL_BASE + 0,
    "end_of_speech": SPECIAL_BASE + 1,
    "start_of_text": SPECIAL_BASE + 3,
    "end_of_text": SPECIAL_BASE + 4,
    "tts_pad": SPECIAL_BASE + 6,
    "tokeniser_length": SPECIAL_BASE + 7,
}
VOCAB_SIZE = 640  # >= tokeniser_length + 8 speaker slots

_CORPUS = """
The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore.
Hello world, this is Gepard speaking. How are you today? I am fine, thank you very much!
The weather is sunny today, with a light breeze from the west and a high of 21 degrees.
Please call Dr. Smith at 555-0142 before 9:30 a.m. on Monday, March 3rd, 2025.
It costs $12.50, or about 11 euros; the total was 1,024 dollars and 7 cents.
Visit https://example.com or write to info@example.org for more information.
"Wait," he said, "are you sure?" -- Yes; absolutely (no doubt): it's done.
Peter Piper picked a peck of pickled peppers. Red lorry, yellow lorry.
London, Paris, Tokyo, New York, Berlin and Sydney are large cities in the world.
Open the door. Turn left at the next corner. Stop! Go now. Read this aloud, please.
One two three four five six seven eight nine ten eleven twelve hundred thousand million.
""".strip().splitlines()


def backbone_config() -> Qwen3_5TextConfig:
    """Qwen3.5 text config in miniature: 3 Gated-DeltaNet layers then 1 full-attention layer.

    Linear key/value head dim stays 128 because vLLM's CPU kernel requires it.
    """
    return Qwen3_5TextConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        linear_num_key_heads=1,
        linear_num_value_heads=1,
        linear_key_head_dim=128,
        linear_value_head_dim=128,
        linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25},
        tie_word_embeddings=False,
    )


def sidecar(backbone: dict) -> dict:
    nested = dict(backbone)
    # The published sidecar carries vestigial mRoPE keys; keep them so the loader's stripping is exercised.
    nested["rope_parameters"] = {**backbone["rope_parameters"], "mrope_section": [11, 11, 10], "mrope_interleaved": True}
    levels = [8, 7, 6, 6] * 8
    return {
        "backbone_config": nested,
        "audio_heads": {f"level_audio_{i}": n for i, n in enumerate(levels)},
        "audio_embed_dim": 32,
        "special_tokens": SPECIAL_TOKENS,
        "text_repetition": {"enabled": True, "target_text_tokens": 16, "apply_below": 13, "max_repeats": 8},
        "codec": {
            "codec_id": TINY_CODEC_FILE,
            "sample_rate": 22050,
            "frame_rate_hz": 21.5,
            "fsq_levels": [[8, 7, 6, 6]],
            "num_layers": 8,
            "do_unfold": True,
        },
        "voice_cloning": {"enabled": False, "compressor": {"num_queries": 8}},
        "stop_threshold": 0.5,
        "temperature": 0.3,
        "max_frames": 1000,
        "random_weights": True,
        "tiny_version": TINY_VERSION,
    }


def train_tokenizer() -> PreTrainedTokenizerFast:
    # Byte-level, so any unicode input still encodes (to bytes) instead of failing.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TEXT_VOCAB,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=4096)


def random_state(config: GepardConfig, seed: int) -> dict[str, torch.Tensor]:
    from .talker import GepardTalker

    torch.manual_seed(seed)
    talker = GepardTalker(config)
    with torch.no_grad():
        # A stop head that fires now and then (utterances of a few dozen frames at 0.5),
        # rather than at the first step or never, so the demo and eval see both outcomes.
        talker.stop_head.weight.normal_(0.0, 0.15)
        talker.stop_head.bias.fill_(-3.5)
        talker.null_prefix.normal_(0.0, 0.02)
        talker.audio_embed_scale.fill_(1.0)
    state = {k: v.detach().clone().contiguous() for k, v in talker.state_dict().items()}
    hidden = config.hidden_size
    gen = torch.Generator().manual_seed(seed + 1)
    # Keys a real training checkpoint carries and inference must skip (or never reads).
    state["lm_head.weight"] = torch.randn(VOCAB_SIZE, hidden, generator=gen) * 0.02
    state["aligner.proj.weight"] = torch.randn(16, hidden, generator=gen)
    state["supcon_head.weight"] = torch.randn(16, hidden, generator=gen)
    state["mtp.0.weight"] = torch.randn(hidden, hidden, generator=gen)
    state["ref_compressor.queries"] = torch.randn(8, hidden, generator=gen)
    return state


def make_tiny(out_dir: str | Path, seed: int = 0) -> Path:
    """Write the tiny checkpoint (and its codec) into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bb = backbone_config().to_dict()
    bb["model_type"] = "qwen3_5_text"
    bb["architectures"] = ["Qwen3_5ForCausalLM"]
    (out / "config.json").write_text(json.dumps(bb, indent=2, sort_keys=True))
    (out / "gepard_config.json").write_text(json.dumps(sidecar(bb), indent=2))
    train_tokenizer().save_pretrained(str(out))
    config = GepardConfig.from_dir(out)
    save_file(random_state(config, seed), str(out / "model.safetensors"), metadata={"format": "pt"})
    from .codec import make_tiny_codec

    make_tiny_codec(out / TINY_CODEC_FILE, seed=seed)
    return out


def ensure_tiny(cache_dir: Path, seed: int = 0) -> Path:
    """The cached tiny checkpoint, built on first use. Built aside and renamed into place, so a
    crash or a concurrent builder never leaves a half-written checkpoint behind."""
    target = cache_dir / f"{TINY_VERSION}-seed{seed}"
    if (target / "model.safetensors").exists() and (target / TINY_CODEC_FILE).exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-", dir=cache_dir))
    try:
        make_tiny(staging, seed=seed)
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
