"""Loading a checkpoint laid out as the authors export Gepard-1.0 (facts §1, gepard-train's
modeling.py / checkpoint_io.py): one-element scalars of either shape, authoritative rotary,
bf16 on disk, no null_prefix, and every key family of the export."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from gepard_demo.model.checkpoints.tiny import ref_compressor_state
from gepard_demo.model.config import GepardConfig
from gepard_demo.model.engine import GepardEngine
from gepard_demo.model.talker import CheckpointError
from gepard_demo.settings import SamplingSettings

GREEDY = SamplingSettings(greedy=True, max_frames=12, stop_threshold=0.999)


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _rewrite(ck, fn):
    state = load_file(str(ck / "model.safetensors"))
    state = fn(state) or state
    save_file(state, str(ck / "model.safetensors"))


def _json(path, fn):
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def test_one_element_scalars_load_whatever_their_shape(tiny_model_dir, tmp_path):
    on_disk = load_file(str(tiny_model_dir / "model.safetensors"))
    assert on_disk["audio_embed_scale"].shape == (1,)  # as the authors declare it
    scale = float(on_disk["audio_embed_scale"])
    engine = GepardEngine.load(str(tiny_model_dir))
    assert float(engine.talker.audio_embed_scale) == pytest.approx(scale)
    # An older file's 0-dim scalar, and a [1] bias stored 0-dim, load just the same.
    ck = _copy(tiny_model_dir, tmp_path / "zero-dim")
    _rewrite(ck, lambda s: s.update(audio_embed_scale=s["audio_embed_scale"].reshape(()),
                                    **{"stop_head.bias": s["stop_head.bias"].reshape(())}))
    old = GepardEngine.load(str(ck))
    assert float(old.talker.audio_embed_scale) == pytest.approx(scale)
    assert torch.equal(old.talker.stop_head.bias, on_disk["stop_head.bias"])


def test_real_shape_mismatches_still_fail_with_their_names(tiny_model_dir, tmp_path):
    ck = _copy(tiny_model_dir, tmp_path / "bad")
    _rewrite(ck, lambda s: s.update(audio_embed_scale=torch.ones(2), **{"stop_head.weight": torch.zeros(1, 3)}))
    with pytest.raises(CheckpointError) as err:
        GepardEngine.load(str(ck))
    assert "audio_embed_scale (2,)" in str(err.value) and "stop_head.weight (1, 3)" in str(err.value)


def _rope(engine):
    bb = engine.config.backbone
    return bb.partial_rotary_factor, bb.rope_parameters["partial_rotary_factor"], engine.talker.model.rotary_emb.inv_freq.numel()


def test_sidecar_rotary_factor_is_forced_into_both_copies(tiny_model_dir, tmp_path):
    head_dim = GepardConfig.from_dir(tiny_model_dir).backbone.head_dim
    # The stock backbone's diverged copies: nested lacks the factor, flat says 0.25; the
    # sidecar does not say either, so its default 1.0 rules.
    stale = _copy(tiny_model_dir, tmp_path / "stale")
    _json(stale / "config.json", lambda c: (c.__setitem__("partial_rotary_factor", 0.25),
                                            c["rope_parameters"].pop("partial_rotary_factor", None)))
    _json(stale / "gepard_config.json", lambda c: c.pop("partial_rotary_factor"))
    # The same weights with a consistent config: what the authors' runner computes with.
    clean = _copy(tiny_model_dir, tmp_path / "clean")
    _json(clean / "config.json", lambda c: (c.__setitem__("partial_rotary_factor", 1.0),
                                            c["rope_parameters"].__setitem__("partial_rotary_factor", 1.0)))
    a, b = GepardEngine.load(str(stale)), GepardEngine.load(str(clean))
    assert _rope(a) == _rope(b) == (1.0, 1.0, head_dim // 2)
    text = "The weather is sunny today."
    assert torch.equal(a.generate([text], GREEDY)[0].frames, b.generate([text], GREEDY)[0].frames)
    # Whatever the sidecar states wins over both copies in config.json.
    _json(clean / "gepard_config.json", lambda c: c.__setitem__("partial_rotary_factor", 0.5))
    assert _rope(GepardEngine.load(str(clean))) == (0.5, 0.5, head_dim // 4)


def test_bf16_weights_on_disk_load_into_fp32(tiny_model_dir, tmp_path):
    ck = _copy(tiny_model_dir, tmp_path / "bf16")
    _rewrite(ck, lambda s: {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in s.items()})
    engine = GepardEngine.load(str(ck))
    on_disk = load_file(str(ck / "model.safetensors"))
    assert {p.dtype for p in engine.talker.parameters()} == {torch.float32}
    assert torch.equal(engine.talker.codebook_heads[3].weight, on_disk["codebook_heads.3.weight"].float())
    assert engine.generate(["Hi"], GREEDY)[0].num_frames >= 1


def test_no_null_prefix_runs_with_no_speaker_slots(tiny_model_dir, tmp_path):
    ck = _copy(tiny_model_dir, tmp_path / "no-vc")
    _rewrite(ck, lambda s: {k: v for k, v in s.items() if k != "null_prefix" and not k.startswith("ref_compressor.")})
    _json(ck / "gepard_config.json", lambda c: c.__setitem__("voice_cloning", {"enabled": False}))
    engine = GepardEngine.load(str(ck))
    assert engine.config.num_speaker_prefix == 0 and engine.talker.null_prefix is None
    ids = engine.prompt_ids("Hello world")
    assert ids[0] == engine.config.special_tokens.start_of_text
    assert not any(i >= engine.config.speaker_token_base for i in ids)
    res = engine.generate(["Hello world", "Hi"], SamplingSettings(seed=3, max_frames=8))
    assert all(r.num_frames >= 1 for r in res)


def _authors_export(tiny_dir, out, lm_head: bool = False):
    """The tiny weights laid out as gepard-train writes Gepard-1.0: backbone `model.*`, heads,
    frame embedding, `audio_embed_scale` [1], `null_prefix` (K, d), the compressor
    (`output_scale` 0-dim, as every published file holds it), SupCon projection head, and
    leftovers from older trainers (aligner, mtp); all bf16. lm_head: keep a text head, as
    facts §1 lists (`model.*` and `lm_head.*`); the authors' current model has none."""
    ck = _copy(tiny_dir, out)
    cfg = GepardConfig.from_dir(ck)
    comp = json.loads((ck / "gepard_config.json").read_text())["voice_cloning"]["compressor"]
    gen = torch.Generator().manual_seed(5)
    hidden = cfg.hidden_size
    dropped = ("ref_compressor.", "supcon_head.", "aligner.", "mtp.") + (() if lm_head else ("lm_head.",))

    def fn(s):
        s = {k: v for k, v in s.items() if not k.startswith(dropped)}
        rc = ref_compressor_state(comp, cfg.num_heads, gen)
        rc["ref_compressor.output_scale"] = rc["ref_compressor.output_scale"].reshape(())
        s.update(rc)
        s.update({
            "supcon_head.fc1.weight": torch.randn(128, hidden, generator=gen),
            "supcon_head.fc1.bias": torch.randn(128, generator=gen),
            "supcon_head.fc2.weight": torch.randn(128, 128, generator=gen),
            "aligner.proj.weight": torch.randn(16, hidden, generator=gen),
            "mtp.0.weight": torch.randn(hidden, hidden, generator=gen),
        })
        return {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in s.items()}

    _rewrite(ck, fn)
    return ck


@pytest.mark.parametrize("lm_head", [False, True], ids=["authors-code", "facts-sheet"])
def test_checkpoint_in_the_authors_export_layout(tiny_model_dir, tmp_path, lm_head):
    from gepard_demo.voice.compressor import CompressorConfig, RefCompressor
    from gepard_demo.voice.speaker_prefix import read_compressor_state

    ck = _authors_export(tiny_model_dir, tmp_path / "export", lm_head=lm_head)
    on_disk = load_file(str(ck / "model.safetensors"))
    assert on_disk["audio_embed_scale"].shape == (1,) and on_disk["ref_compressor.output_scale"].shape == ()
    assert ("lm_head.weight" in on_disk) == lm_head and "null_prefix" in on_disk
    assert {v.dtype for v in on_disk.values()} == {torch.bfloat16}
    engine = GepardEngine.load(str(ck))
    talker = engine.talker
    assert engine.config.num_speaker_prefix == on_disk["null_prefix"].shape[0] == 8
    assert all(t == "full_attention" for t in engine.config.backbone.layer_types)
    assert engine.config.backbone.rope_parameters["partial_rotary_factor"] == 1.0
    skipped = ("lm_head.", "ref_compressor.", "supcon_head.", "aligner.", "mtp.")
    loaded = talker.state_dict()
    for key, value in on_disk.items():
        if key.startswith(skipped):
            assert key not in loaded
        else:
            assert torch.equal(loaded[key], value.float().reshape(loaded[key].shape)), key
    assert set(loaded) == {k for k in on_disk if not k.startswith(skipped)}
    res = engine.generate(["Hello world", "The weather is sunny today."], SamplingSettings(seed=1, max_frames=10))
    assert all(1 <= r.num_frames <= 10 for r in res)

    # The bf16 compressor loads too (the speaker prefixer's path), into fp32, value for value.
    sidecar = json.loads((ck / "gepard_config.json").read_text())
    compressor = RefCompressor(CompressorConfig.from_sidecar(sidecar, engine.config.hidden_size), (8,) * 32)
    compressor.load_weights(read_compressor_state(ck), source=str(ck))
    for key, value in compressor.state_dict().items():
        assert value.dtype == torch.float32, key
        assert torch.equal(value, on_disk[f"ref_compressor.{key}"].float().reshape(value.shape)), key


def test_full_size_builder_has_gepard_1_0s_shape():
    from gepard_demo.model.checkpoints.full_size import full_size_config
    from gepard_demo.model.talker import GepardTalker

    cfg = full_size_config()
    bb = cfg.backbone
    assert bb.layer_types == ["full_attention"] * 14
    assert (bb.hidden_size, bb.num_attention_heads, bb.num_key_value_heads, bb.head_dim) == (1024, 8, 2, 256)
    assert (bb.intermediate_size, bb.vocab_size) == (3584, 248320)
    assert bb.rope_parameters["rope_theta"] == 1e7 and bb.rope_parameters["partial_rotary_factor"] == 1.0
    assert cfg.num_speaker_prefix == 8 and cfg.special_tokens.tokeniser_length + 8 <= bb.vocab_size
    with torch.device("meta"):
        talker = GepardTalker(cfg)
    params = sum(p.numel() for p in talker.parameters())
    assert 0.45e9 < params < 0.55e9  # "about 0.5B"
