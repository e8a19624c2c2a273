"""A tiny Gepard checkpoint in exactly the published layout, with random weights.

Real checkpoints cannot be downloaded here, so tests and the offline demo load this one through
the same code path as the real model. The default layout is Gepard-1.0 in miniature (facts §1):
every layer full attention, `partial_rotary_factor` 1.0 in `gepard_config.json` while the flat
and nested rotary copies in `config.json` disagree with it and with each other (the loader must
not care), `audio_embed_scale` shaped [1], a `null_prefix` and the voice-cloning compressor's
`ref_compressor.*` weights (names and shapes of the authors' RefCompressor), plus a few
training-only keys the loader must skip, a byte-level BPE tokenizer trained here, and a tiny
NanoCodec `.nemo` beside them.

`layout="hybrid"` writes the second test model: Qwen3.5's class default of 3 Gated-DeltaNet
layers + 1 full-attention layer, quarter rotary, and no voice cloning (no `null_prefix`, so no
speaker slots), as a checkpoint trained without cloning is laid out.

No weight is left at an identity value (scale 1, norm gains 1, zero offsets): a stage the code
forgot to apply then changes the output, and the tests can see it. Its audio is noise, and its
config says so (`random_weights`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3_5TextConfig

from gepard_demo.model.config import OPERATING_POINT, GepardConfig

TINY_VERSION = "tiny-v2"
LAYOUTS = ("full", "hybrid")
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



def backbone_config(layout: str = "full") -> Qwen3_5TextConfig:
    """Qwen3.5 text config in miniature.

    "full": 4 full-attention layers, as Gepard-1.0's 14 (facts §1). "hybrid": 3 Gated-DeltaNet
    layers then 1 full-attention layer; linear key/value head dim stays 128 because vLLM's CPU
    kernel requires it.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    hybrid = layout == "hybrid"
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
        layer_types=["linear_attention"] * 3 + ["full_attention"] if hybrid else ["full_attention"] * 4,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0,
                         "partial_rotary_factor": rotary_factor(layout)},
        tie_word_embeddings=False,
    )


def rotary_factor(layout: str) -> float:
    """The authoritative rotary coverage the sidecar states for each layout."""
    return 0.25 if layout == "hybrid" else 1.0


def backbone_json(layout: str = "full") -> dict:
    """config.json as written to disk. For "full" its two rotary copies disagree with each other
    and with the sidecar (flat 0.25 as the stock backbone ships, nested 0.5): only the sidecar's
    top-level value may decide."""
    bb = backbone_config(layout).to_dict()
    bb["model_type"] = "qwen3_5_text"
    bb["architectures"] = ["Qwen3_5ForCausalLM"]
    if layout == "full":
        bb["partial_rotary_factor"] = 0.25
        bb["rope_parameters"] = {**bb["rope_parameters"], "partial_rotary_factor": 0.5}
    return bb


def compressor_settings(hidden: int) -> dict:
    """The sidecar's voice_cloning.compressor section (authors' schema), scaled to the tiny."""
    return {"num_queries": 8, "num_layers": 2, "num_heads": 2, "d_model": hidden,
            "ffn_hidden_size_multiplier": 4, "dropout": 0.1}


def sidecar(backbone: dict, layout: str = "full") -> dict:
    nested = dict(backbone)
    # The published sidecar carries vestigial mRoPE keys; keep them so the loader's stripping is exercised.
    nested["rope_parameters"] = {**backbone["rope_parameters"], "mrope_section": [11, 11, 10], "mrope_interleaved": True}
    levels = [8, 7, 6, 6] * 8
    cloning = layout == "full"
    voice_cloning = (
        {"enabled": True, "compressor": compressor_settings(backbone["hidden_size"]),
         "training": {"cfg_dropout_prob": 0.15, "supcon": {"enabled": False, "use_projection": False},
                      "diversity_loss": {"enabled": False}}}
        if cloning else {"enabled": False}
    )
    return {
        "backbone_config": nested,
        "audio_heads": {f"level_audio_{i}": n for i, n in enumerate(levels)},
        "audio_embed_dim": 32,
        "partial_rotary_factor": rotary_factor(layout),
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
        "voice_cloning": voice_cloning,
        "model_dtype": "bfloat16",
        **OPERATING_POINT,
        "random_weights": True,
        "tiny_version": TINY_VERSION,
        "tiny_layout": layout,
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


def ref_compressor_state(settings: dict, codec_channels: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """`ref_compressor.*` with the names and shapes of the authors' RefCompressor
    (gepard/model/ref_compressor.py): input_proj, queries, Q-Former blocks (RMSNorm gains,
    self/cross attention q/k/v/out projections without bias, SwiGLU FFN), final_norm and a
    one-element output_scale of shape [1]."""
    d = int(settings["d_model"])
    ffn = d * int(settings["ffn_hidden_size_multiplier"])

    def rand(*shape, std=None):
        return torch.randn(*shape, generator=gen) * (std if std is not None else shape[-1] ** -0.5)

    state = {
        "ref_compressor.input_proj.weight": rand(d, codec_channels),
        "ref_compressor.input_proj.bias": rand(d, std=0.02),
        "ref_compressor.queries": rand(int(settings["num_queries"]), d, std=0.02),
        "ref_compressor.final_norm.weight": 1.0 + rand(d, std=0.1),
        "ref_compressor.output_scale": torch.tensor([d ** -0.5 * 1.3]),
    }
    for b in range(int(settings["num_layers"])):
        p = f"ref_compressor.blocks.{b}."
        for norm in ("norm_self", "norm_cross", "norm_ffn"):
            state[p + norm + ".weight"] = 1.0 + rand(d, std=0.1)
        for attn in ("self_attn", "cross_attn"):
            for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
                state[f"{p}{attn}.{proj}.weight"] = rand(d, d)
        state[p + "ffn.gate_proj.weight"] = rand(ffn, d)
        state[p + "ffn.up_proj.weight"] = rand(ffn, d)
        state[p + "ffn.down_proj.weight"] = rand(d, ffn)
    return state


def _no_identity_values(talker, gen: torch.Generator) -> None:
    """Every weight that init leaves constant (norm gains 1 or 0-offset, dt_bias 1, zero biases)
    gets a random, non-trivial value, so a stage the code skips changes the output."""
    for name, p in talker.named_parameters():
        if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
            p.add_(torch.randn(p.shape, generator=gen) * 0.2)


def random_state(config: GepardConfig, seed: int, layout: str = "full") -> dict[str, torch.Tensor]:
    from gepard_demo.model.talker import GepardTalker

    torch.manual_seed(seed)
    talker = GepardTalker(config)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        _no_identity_values(talker, gen)
        # A stop head that fires now and then (utterances of a few dozen frames at 0.5),
        # rather than at the first step or never, so the demo and eval see both outcomes.
        talker.stop_head.weight.normal_(0.0, 0.15)
        talker.stop_head.bias.fill_(-3.5)
        if talker.null_prefix is not None:
            # Well away from the slot tokens' own embeddings, so using those shows.
            talker.null_prefix.normal_(0.0, 1.0)
        # The authors set it to the text-embedding std; anything but 1.0 makes it visible.
        talker.audio_embed_scale.fill_(0.37)
    state = {k: v.detach().clone().contiguous() for k, v in talker.state_dict().items()}
    hidden = config.hidden_size
    # Keys a real training checkpoint may carry and inference must skip (or never reads).
    state["lm_head.weight"] = torch.randn(VOCAB_SIZE, hidden, generator=gen) * 0.02
    state["aligner.proj.weight"] = torch.randn(16, hidden, generator=gen)
    state["supcon_head.fc1.weight"] = torch.randn(16, hidden, generator=gen)
    state["mtp.0.weight"] = torch.randn(hidden, hidden, generator=gen)
    if layout == "full":
        state.update(ref_compressor_state(compressor_settings(hidden), config.num_heads, gen))
    return state


def make_tiny(out_dir: str | Path, seed: int = 0, layout: str = "full") -> Path:
    """Write the tiny checkpoint (and its codec) into out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bb = backbone_json(layout)
    (out / "config.json").write_text(json.dumps(bb, indent=2, sort_keys=True))
    (out / "gepard_config.json").write_text(json.dumps(sidecar(bb, layout), indent=2))
    train_tokenizer().save_pretrained(str(out))
    config = GepardConfig.from_dir(out)
    if layout == "hybrid":
        config = dataclasses.replace(config, num_speaker_prefix=0)
    save_file(random_state(config, seed, layout), str(out / "model.safetensors"), metadata={"format": "pt"})
    from gepard_demo.codec import make_tiny_codec

    make_tiny_codec(out / TINY_CODEC_FILE, seed=seed)
    return out


def ensure_tiny(cache_dir: Path, seed: int = 0, layout: str = "full") -> Path:
    """The cached tiny checkpoint, built on first use. Built aside and renamed into place, so a
    crash or a concurrent builder never leaves a half-written checkpoint behind."""
    suffix = "" if layout == "full" else f"-{layout}"
    target = cache_dir / f"{TINY_VERSION}{suffix}-seed{seed}"
    if (target / "model.safetensors").exists() and (target / TINY_CODEC_FILE).exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tiny-", dir=cache_dir))
    try:
        make_tiny(staging, seed=seed, layout=layout)
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
