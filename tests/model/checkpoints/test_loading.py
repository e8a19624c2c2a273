"""Loading: the tiny checkpoint goes through exactly the path a real one takes."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from gepard_demo.model.checkpoints.source import ModelNotFoundError, resolve_model
from gepard_demo.model.checkpoints.tiny import ensure_tiny
from gepard_demo.model.config import ConfigError, GepardConfig
from gepard_demo.model.engine import GepardEngine
from gepard_demo.model.talker import CheckpointError, GepardTalker


def test_tiny_has_the_published_layout(tiny_model_dir, tiny_cache_dir):
    names = {p.name for p in tiny_model_dir.iterdir()}
    assert {"config.json", "gepard_config.json", "model.safetensors", "tokenizer.json"} <= names
    bb = json.loads((tiny_model_dir / "config.json").read_text())
    side = json.loads((tiny_model_dir / "gepard_config.json").read_text())
    assert bb["model_type"] == "qwen3_5_text"
    # Gepard-1.0 in miniature: all full attention; rotary copies that disagree with the sidecar.
    assert set(bb["layer_types"]) == {"full_attention"}
    assert side["partial_rotary_factor"] == 1.0
    assert len({bb["partial_rotary_factor"], bb["rope_parameters"]["partial_rotary_factor"], 1.0}) == 3
    assert side["voice_cloning"]["enabled"] and side["voice_cloning"]["compressor"]["num_queries"] == 8
    state = load_file(str(tiny_model_dir / "model.safetensors"))
    for name in ["model.embed_tokens.weight", "codebook_heads.31.bias", "stop_head.weight",
                 "audio_embeddings.0.weight", "audio_embed_proj.0.weight", "audio_embed_scale",
                 "null_prefix", "lm_head.weight", "aligner.proj.weight", "mtp.0.weight",
                 "ref_compressor.queries", "ref_compressor.output_scale",
                 "ref_compressor.blocks.1.cross_attn.out_proj.weight", "ref_compressor.blocks.0.ffn.down_proj.weight"]:
        assert name in state
    assert state["audio_embed_scale"].shape == (1,)
    d, comp = bb["hidden_size"], side["voice_cloning"]["compressor"]
    assert state["ref_compressor.input_proj.weight"].shape == (d, 32)
    assert state["ref_compressor.queries"].shape == state["null_prefix"].shape == (8, d)
    assert state["ref_compressor.blocks.0.ffn.gate_proj.weight"].shape == (d * comp["ffn_hidden_size_multiplier"], d)
    assert len({k.split(".")[2] for k in state if k.startswith("ref_compressor.blocks.")}) == comp["num_layers"]
    # The second test model: Qwen3.5's hybrid default, no voice cloning, so no speaker slots.
    hybrid = ensure_tiny(tiny_cache_dir, layout="hybrid")
    hb = json.loads((hybrid / "config.json").read_text())
    assert hb["layer_types"] == ["linear_attention"] * 3 + ["full_attention"]
    assert hb["linear_key_head_dim"] == hb["linear_value_head_dim"] == 128
    hstate = load_file(str(hybrid / "model.safetensors"))
    assert "null_prefix" not in hstate and not any(k.startswith("ref_compressor.") for k in hstate)


def test_config_reads_sidecar_and_strips_mrope(tiny_model_dir):
    cfg = GepardConfig.from_dir(tiny_model_dir)
    assert cfg.audio_head_levels == (8, 7, 6, 6) * 8
    assert cfg.special_tokens.tokeniser_length == 607
    assert cfg.codec.fsq_levels == (8, 7, 6, 6) and cfg.codec.num_groups == 8
    assert "mrope_section" not in (cfg.backbone.rope_parameters or {})


def test_missing_sidecar_fields_take_published_defaults(tiny_model_dir):
    bb = json.loads((tiny_model_dir / "config.json").read_text())
    cfg = GepardConfig.from_dicts(bb, {})
    assert cfg.special_tokens.start_of_speech == 248070
    assert cfg.text_repetition.target_text_tokens == 16
    assert cfg.num_speaker_prefix == 8 and cfg.operating_point == {"stop_threshold": 0.5, "temperature": 0.3, "max_frames": 1000}
    # a sidecar's own operating point, read with each setting's type (the engine's default sampling)
    own = GepardConfig.from_dicts(bb, {"temperature": "0.7", "max_frames": 500.0})
    assert own.operating_point == {"stop_threshold": 0.5, "temperature": 0.7, "max_frames": 500}
    assert type(own.operating_point["max_frames"]) is int
    assert cfg.codec.codec_id == "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"
    with pytest.raises(ConfigError, match="qwen3_5_text"):
        GepardConfig.from_dicts({**bb, "model_type": "llama"}, {})


def test_engine_loads_tiny_by_name_and_by_path(tiny_cache_dir, tiny_model_dir):
    by_name = GepardEngine.load("tiny", cache_dir=tiny_cache_dir)
    by_path = GepardEngine.load(str(tiny_model_dir))
    assert by_name.model_info.random_weights and by_path.model_info.random_weights
    for a, b in zip(by_name.talker.state_dict().values(), by_path.talker.state_dict().values()):
        assert torch.equal(a, b)
    on_disk = load_file(str(tiny_model_dir / "model.safetensors"))
    assert torch.equal(by_path.talker.stop_head.weight, on_disk["stop_head.weight"])
    assert torch.equal(by_path.talker.null_prefix, on_disk["null_prefix"])


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def test_missing_key_fails_with_its_name(tiny_model_dir, tmp_path):
    ck = _copy(tiny_model_dir, tmp_path / "ck")
    state = load_file(str(ck / "model.safetensors"))
    del state["codebook_heads.7.weight"]
    state["surprise.weight"] = torch.zeros(2)
    save_file(state, str(ck / "model.safetensors"))
    with pytest.raises(CheckpointError) as err:
        GepardEngine.load(str(ck))
    assert "codebook_heads.7.weight" in str(err.value) and "surprise.weight" in str(err.value)


def test_sharded_checkpoint_loads(tiny_model_dir, tmp_path):
    ck = _copy(tiny_model_dir, tmp_path / "ck")
    state = load_file(str(ck / "model.safetensors"))
    keys = sorted(state)
    half = len(keys) // 2
    shards = {"model-00001-of-00002.safetensors": keys[:half], "model-00002-of-00002.safetensors": keys[half:]}
    for name, part in shards.items():
        save_file({k: state[k] for k in part}, str(ck / name))
    (ck / "model.safetensors").unlink()
    index = {"weight_map": {k: name for name, part in shards.items() for k in part}}
    (ck / "model.safetensors.index.json").write_text(json.dumps(index))
    talker = GepardTalker(GepardConfig.from_dir(ck))
    talker.load_checkpoint(ck)
    assert torch.equal(talker.codebook_heads[31].bias, state["codebook_heads.31.bias"])


def test_hub_id_offline_says_how_to_fix(tmp_path):
    with pytest.raises(ModelNotFoundError, match="GEPARD_MODEL"):
        resolve_model("nineninesix/definitely-not-here")
    with pytest.raises(ModelNotFoundError, match="neither"):
        resolve_model(str(tmp_path / "nope" / "deeper"))
    with pytest.raises(ModelNotFoundError, match="config.json"):
        resolve_model(str(tmp_path))
