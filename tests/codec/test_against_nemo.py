"""The native decoder against NeMo 3.0's AudioCodecModel on the same random weights.

Uses the real NeMo (requirements-nemo.txt, installed by `make test`); NeMo's import and each
restore are slow, so the restored models are cached per process in codec_fixtures.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from tests.support.codec_fixtures import (
    TOL,
    full_codes,
    full_native,
    full_nemo,
    full_whole_decode,
    max_diff,
    random_codes,
    tiny_native,
    tiny_nemo,
    tiny_path,
    torch_threads,
    workdir,
)
from gepard_demo.codec import codes_to_tokens, dequantize, load_codec
from gepard_demo.codec.nemo_archive import read_config, read_nemo
from gepard_demo.codec.nemo_backend import restore_config
from gepard_demo.codec.tiny import write_random_codec

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs


@pytest.mark.slow
@pytest.mark.parametrize("n_frames, seed", [(1, 0), (37, 1), (120, 2)])
def test_tiny_decode_matches_nemo(n_frames, seed):
    codes = random_codes(n_frames, seed=seed)
    ours, ref = tiny_native().decode(codes), tiny_nemo().decode(codes)
    assert ours.shape == ref.shape == (n_frames * 1024,)
    assert max_diff(ours, ref) <= TOL


@pytest.mark.slow
def test_dequantize_matches_nemos_own():
    nemo = tiny_nemo()
    codes = np.concatenate([random_codes(64, seed=5), np.zeros((1, 32), np.int64), [[7, 6, 5, 5] * 8]])
    ours = dequantize(codes)
    assert torch.equal(nemo.dequantize(codes), ours)  # NeMo: group tokens -> vector_quantizer.decode
    # and NeMo's inverse maps our dequantized vectors back to our token folding
    vq = nemo.model.vector_quantizer
    idx = vq.codes_to_indices(codes=ours.T.unsqueeze(0), input_len=torch.tensor([len(codes)]))
    assert torch.equal(idx[0].T.long(), codes_to_tokens(codes))


@pytest.mark.slow
def test_tiny_nemo_file_has_nemos_key_names_and_shapes():
    ours = read_nemo(tiny_path()).state_dict
    nemo_sd = tiny_nemo().model.state_dict()
    assert set(ours) <= set(nemo_sd), sorted(set(ours) - set(nemo_sd))[:5]
    # what NeMo has beyond ours are loss-function buffers it rebuilds from the config
    assert all(k.startswith(("mel_loss_fn.", "stft_loss_fn.")) for k in set(nemo_sd) - set(ours))
    assert all(ours[k].shape == nemo_sd[k].shape for k in ours)
    assert len([k for k in ours if k.startswith("audio_decoder.")]) == 387  # as NeMo's full decoder


@pytest.mark.slow
def test_full_size_decode_matches_nemo():
    with torch_threads(1):
        ref = full_nemo().decode(full_codes())
        blocked = full_native().decode(full_codes())  # 100 frames: decode() runs in two blocks
    assert max_diff(full_whole_decode(), ref) <= TOL
    assert max_diff(blocked, ref) <= TOL
    n_params = sum(p.numel() for p in full_nemo().model.audio_decoder.parameters())
    assert n_params == 31_581_690  # NeMo's count (weight norm as g + v), as in the facts


@pytest.mark.slow
def test_slm_discriminator_config_loads_offline_with_both_backends():
    path = write_random_codec(workdir() / "slm.nemo", seed=0, decoder_channels=64, encoder_channels=4, slm_discriminator=True)
    config = read_config(path)
    assert "SLMDiscriminator" in yaml.safe_dump(config)
    assert "SLMDiscriminator" not in yaml.safe_dump(restore_config(config))
    codes = random_codes(20, seed=8)
    expected = tiny_native().decode(codes)  # same seed and widths: the same decoder weights
    native = load_codec(path)
    assert max_diff(native.decode(codes), expected) <= TOL
    nemo = load_codec(path, backend="nemo")  # NeMo would fetch WavLM if the SLM part were kept
    assert nemo.model.discriminator is None
    assert max_diff(nemo.decode(codes), expected) <= TOL


@pytest.mark.slow
def test_nemo_streamers():
    nemo, native = tiny_nemo(), tiny_native()
    codes = random_codes(60, seed=9)
    whole = nemo.decode(codes)
    sizes = [10, 25, 25]

    def run(dec):
        out, s = [], 0
        for n in sizes:
            out.append(dec.push(codes[s : s + n]))
            assert out[-1].shape == (n * 1024,)
            s += n
        return np.concatenate(out)

    assert max_diff(run(nemo.streamer("exact")), whole) <= TOL  # whole-history re-decode
    assert max_diff(run(nemo.streamer("lookback", 8)), run(native.streamer("lookback", 8))) <= TOL


@pytest.mark.slow
def test_other_topology_read_from_config_matches_nemo():
    """Kernel sizes, dilations, rates, activation and output activation come from the yaml:
    a codec unlike NanoCodec in each of them still decodes as NeMo decodes it."""
    from gepard_demo.codec.nemo_archive import write_nemo
    from gepard_demo.codec.tiny import nanocodec_config, random_codec_state

    config = nanocodec_config(decoder_channels=32, encoder_channels=4)
    config["audio_decoder"].update(
        up_sample_rates=[4, 4, 2], resblock_kernel_sizes=[3, 5], resblock_dilation_sizes=[1, 2],
        activation="snake", output_activation="tanh", in_kernel_size=5, out_kernel_size=7,
        n_groups_equal_to_out_channels=False,
    )
    config["audio_encoder"]["down_sample_rates"] = [2, 4, 4]
    config["samples_per_frame"] = 32
    path = write_nemo(workdir() / "other.nemo", config, random_codec_state(config, seed=3))
    codes = random_codes(40, seed=10)
    native, nemo = load_codec(path), load_codec(path, backend="nemo")
    assert native.samples_per_frame == nemo.samples_per_frame == 32
    assert max_diff(native.decode(codes), nemo.decode(codes)) <= TOL
