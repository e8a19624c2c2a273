"""Reading `.nemo` archives and resolving codec sources, NeMo-free."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.support.codec_fixtures import TOL, max_diff, random_codes, tiny_native, tiny_path
from gepard_demo.codec import CodecLoadError, load_codec, make_tiny_codec
from gepard_demo.codec.hifigan import DecoderConfig
from gepard_demo.codec.nemo_archive import read_nemo, write_nemo
from gepard_demo.codec.tiny import nanocodec_config, random_codec_state


def test_tiny_codec_is_a_real_nemo_tar(tmp_path):
    path = make_tiny_codec(tmp_path / "t.nemo", seed=0)
    with tarfile.open(path) as tar:
        names = sorted(tar.getnames())
    assert names == ["./model_config.yaml", "./model_weights.ckpt"]
    archive = read_nemo(path)
    cfg = archive.config
    assert cfg["audio_decoder"]["up_sample_rates"] == [8, 8, 4, 2, 2]
    assert cfg["audio_decoder"]["activation"] == "half_snake"
    assert cfg["vector_quantizer"]["num_levels_per_group"] == [8, 7, 6, 6]
    assert any(k.startswith("audio_encoder.") for k in archive.state_dict)
    assert "audio_decoder.pre_conv.conv.parametrizations.weight.original0" in archive.state_dict


def test_same_seed_same_file_contents_other_seed_differs(tmp_path):
    a = read_nemo(make_tiny_codec(tmp_path / "a.nemo", seed=0)).state_dict
    b = read_nemo(make_tiny_codec(tmp_path / "b.nemo", seed=0)).state_dict
    c = read_nemo(make_tiny_codec(tmp_path / "c.nemo", seed=1)).state_dict
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a if a[k].is_floating_point())


def test_omitted_decoder_keys_take_nemo_defaults():
    cfg = DecoderConfig.from_config(nanocodec_config()["audio_decoder"])
    assert cfg.resblock_kernel_sizes == (3, 7, 11) and cfg.resblock_dilation_sizes == (1, 3, 5)
    assert cfg.in_kernel_size == 7 and cfg.out_kernel_size == 3
    assert cfg.base_channels == 864 and cfg.samples_per_frame == 1024


def test_topology_comes_from_the_config(tmp_path):
    config = nanocodec_config(decoder_channels=32, encoder_channels=4)
    config["audio_decoder"].update(
        up_sample_rates=[4, 4, 2], resblock_kernel_sizes=[3, 5], resblock_dilation_sizes=[1, 2],
        activation="snake", output_activation="tanh", in_kernel_size=5,
    )
    config["samples_per_frame"] = 32
    path = write_nemo(tmp_path / "odd.nemo", config, random_codec_state(config, seed=0))
    codec = load_codec(path)
    assert codec.samples_per_frame == 32
    assert len(codec.decoder.res_layers) == 3 and len(codec.decoder.res_layers[0].res_blocks) == 2
    audio = codec.decode(random_codes(9))
    assert audio.shape == (9 * 32,) and np.abs(audio).max() < 1.0  # tanh, not clamp
    dec = codec.streamer()
    assert max_diff(np.concatenate([dec.push(random_codes(9)[:4]), dec.push(random_codes(9)[4:])]), audio) <= TOL


def test_old_style_weight_norm_keys_load_the_same(tmp_path):
    archive = read_nemo(tiny_path())
    renamed = {}
    for k, v in archive.state_dict.items():
        k = k.replace(".parametrizations.weight.original0", ".weight_g").replace(".parametrizations.weight.original1", ".weight_v")
        renamed[k] = v
    path = write_nemo(tmp_path / "old.nemo", archive.config, renamed)
    codes = random_codes(12, seed=4)
    assert max_diff(load_codec(path).decode(codes), tiny_native().decode(codes)) == 0.0


def test_weights_that_do_not_fit_the_config_are_refused(tmp_path):
    archive = read_nemo(tiny_path())
    cfg = yaml.safe_load(yaml.safe_dump(archive.config))
    cfg["audio_decoder"]["base_channels"] = 128
    with pytest.raises(CodecLoadError, match="shape"):
        load_codec(write_nemo(tmp_path / "wide.nemo", cfg, archive.state_dict))
    state = dict(archive.state_dict)
    del state["audio_decoder.post_conv.conv.bias"]
    with pytest.raises(CodecLoadError, match="missing"):
        load_codec(write_nemo(tmp_path / "holes.nemo", archive.config, state))


def test_unknown_decoder_argument_is_refused(tmp_path):
    archive = read_nemo(tiny_path())
    cfg = yaml.safe_load(yaml.safe_dump(archive.config))
    cfg["audio_decoder"]["use_weight_standardization"] = True
    with pytest.raises(CodecLoadError, match="use_weight_standardization"):
        load_codec(write_nemo(tmp_path / "x.nemo", cfg, archive.state_dict))


def test_a_checkpoint_that_wants_to_run_code_is_refused(tmp_path, capsys):
    class Payload:
        def __reduce__(self):
            return (print, ("code ran",))

    buf = io.BytesIO()
    torch.save({"audio_decoder.x": Payload()}, buf)
    path = tmp_path / "evil.nemo"
    with tarfile.open(path, "w") as tar:
        for name, data in (("model_config.yaml", yaml.safe_dump(nanocodec_config()).encode()), ("model_weights.ckpt", buf.getvalue())):
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(CodecLoadError, match="not a plain tensor checkpoint"):
        load_codec(path)
    assert "code ran" not in capsys.readouterr().out


def test_not_a_tar_and_missing_members(tmp_path):
    junk = tmp_path / "junk.nemo"
    junk.write_bytes(b"not a tar at all")
    with pytest.raises(CodecLoadError, match="not a readable"):
        load_codec(junk)
    half = tmp_path / "half.nemo"
    with tarfile.open(half, "w") as tar:
        info = tarfile.TarInfo("./model_config.yaml")
        data = yaml.safe_dump(nanocodec_config()).encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    with pytest.raises(CodecLoadError, match="model_weights.ckpt"):
        load_codec(half)


def test_local_sources(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    make_tiny_codec(folder / "codec.nemo")
    assert load_codec(folder).source == str(folder / "codec.nemo")
    with pytest.raises(CodecLoadError, match="does not exist"):
        load_codec(tmp_path / "nope.nemo")
    with pytest.raises(ValueError, match="backend"):
        load_codec(folder, backend="onnx")


def _fake_hub_cache(cache: Path, repo_id: str, filename: str) -> Path:
    """The layout huggingface_hub writes: models--owner--name/{refs/main, snapshots/<rev>/file}."""
    rev = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(rev)
    snap = repo / "snapshots" / rev
    snap.mkdir(parents=True)
    return make_tiny_codec(snap / filename)


def test_hub_id_is_found_in_the_local_cache_offline(tmp_path):
    repo_id = "nvidia/nemo-nano-codec-22khz-1.89kbps-21.5fps"
    path = _fake_hub_cache(tmp_path, repo_id, "nemo-nano-codec-22khz-1.89kbps-21.5fps.nemo")
    codec = load_codec(repo_id, cache_dir=tmp_path)
    assert codec.source == str(path)
    codes = random_codes(8)
    assert max_diff(codec.decode(codes), tiny_native().decode(codes)) == 0.0


def test_unreachable_hub_id_says_how_to_use_a_local_file(tmp_path):
    # a repo that exists nowhere: offline it fails to connect, online it is not found
    with pytest.raises(CodecLoadError) as e:
        load_codec("gepard-tests/no-such-codec", cache_dir=tmp_path)
    msg = str(e.value)
    assert "no-such-codec" in msg and "local" in msg and ".nemo" in msg
