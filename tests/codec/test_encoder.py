"""The NeMo-free codec encoder (HiFiGANEncoder + GroupFSQ) against NeMo 3.0's own
AudioCodecModel.encode on identical random weights, tiny and with the encoder at full size.

Two implementations of the same float math can round a value that sits on a quantization
boundary (k + 0.5 after FSQ's compression) differently; everything else must agree. So: codes
equal on >= 99.9% of entries, and every differing entry within 1e-4 of a boundary in both.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from tests.support.codec_fixtures import tiny_nemo, tiny_path, torch_threads, workdir
from gepard_demo.codec import NANOCODEC_LAYOUT, codes_to_tokens, load_codec, tokens_to_codes
from gepard_demo.codec.encoder import CodecEncoder, EncoderConfig
from gepard_demo.codec.errors import CodecLoadError
from gepard_demo.codec.tiny import write_random_codec


def speechlike(seconds: float, seed: int) -> np.ndarray:
    """Harmonics with a moving pitch and a syllable envelope, plus noise bursts."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 22050)) / 22050
    f0 = 110 + 40 * np.sin(2 * np.pi * 0.7 * t + seed)
    phase = 2 * np.pi * np.cumsum(f0) / 22050
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    env = np.clip(np.sin(2 * np.pi * 3.3 * t + seed), 0, None)
    noise = rng.standard_normal(t.size) * (np.sin(2 * np.pi * 1.1 * t) > 0.6)
    return (0.25 * voiced * env + 0.05 * noise).astype(np.float32)


@functools.cache
def full_encoder_path():
    # the encoder at the real width (24 base channels); a small decoder keeps NeMo's restore quick
    return write_random_codec(workdir() / "full-encoder.nemo", seed=2, decoder_channels=64, encoder_channels=24)


def nemo_encode(nemo, audio: np.ndarray):
    """NeMo's tokens (T, G) and its own pre-rounding values (T, 32) for one clip."""
    model = nemo.model
    x = torch.from_numpy(audio).unsqueeze(0)
    n = torch.tensor([x.shape[1]])
    with torch.inference_mode():
        tokens, tokens_len = model.encode(audio=x, audio_len=n)
        latent, _ = model.encode_audio(audio=x, audio_len=n)
        groups = latent.chunk(NANOCODEC_LAYOUT.num_groups, dim=1)
        pre = torch.cat([fsq.compress(inputs=g, input_len=None) for g, fsq in zip(groups, model.vector_quantizer.fsqs)], dim=1)
    return tokens[0, :, : int(tokens_len[0])].T.long(), pre[0].T.float()


def boundary_distance(pre: torch.Tensor) -> torch.Tensor:
    return (pre - (torch.floor(pre) + 0.5)).abs()


def check_parity(ours: CodecEncoder, nemo, clips: list[np.ndarray]) -> tuple[int, int, int]:
    total = differ = 0
    levels_seen = set()
    for audio in clips:
        q = ours.encode_quantized(audio)
        ref_tokens, ref_pre = nemo_encode(nemo, audio)
        ours_codes, ours_tokens = q.codes[0], q.tokens[0]
        assert ours_codes.shape == (int(np.ceil(audio.size / 1024)), 32)
        assert ours_tokens.shape == ref_tokens.shape
        ref_codes = tokens_to_codes(ref_tokens)  # NeMo's group tokens unfolded: what the model takes
        assert torch.equal(codes_to_tokens(ours_codes), ours_tokens)  # our unfold is the inverse of the fold
        diff = ours_codes != ref_codes
        total += diff.numel()
        differ += int(diff.sum())
        if diff.any():
            assert (boundary_distance(q.pre_round[0][diff]) < 1e-4).all()
            assert (boundary_distance(ref_pre[diff]) < 1e-4).all()
            assert ((ours_codes - ref_codes).abs()[diff] == 1).all()  # a rounding flip moves one level
        levels_seen |= {(d, int(c)) for d in range(32) for c in ours_codes[:, d].unique()}
    print(f"encoder parity: {differ} of {total} codes differ ({differ / total:.4%}), all at boundaries")
    assert differ <= total * 0.001, f"{differ} of {total} codes differ"
    return total, differ, len(levels_seen)


@pytest.mark.slow
def test_tiny_encoder_matches_nemo():
    ours = CodecEncoder.from_nemo(tiny_path())
    clips = [speechlike(10.0, 0), speechlike(4.3, 1), speechlike(0.02, 2)]  # 0.02 s: one padded frame
    with torch_threads(1):
        total, _, levels = check_parity(ours, tiny_nemo(), clips)
    assert total == 32 * (216 + 93 + 1)
    assert levels > 32 * 2  # the codes move: a test on constant codes would prove little


@pytest.mark.slow
def test_full_size_encoder_matches_nemo():
    ours = CodecEncoder.from_nemo(full_encoder_path())
    assert ours.encoder.cfg == EncoderConfig(
        encoded_dim=32, down_sample_rates=(2, 2, 4, 8, 8), base_channels=24, activation="lrelu", pad_mode="replicate"
    )
    with torch_threads(2):
        nemo = load_codec(full_encoder_path(), backend="nemo")
        n_params = sum(p.numel() for p in nemo.model.audio_encoder.parameters())
        assert n_params == sum(p.numel() for p in ours.encoder.parameters()) + sum(
            p.shape[0] for n, p in ours.encoder.named_parameters() if n.endswith("weight")
        )  # NeMo counts weight norm as g + v: one g per output channel
        check_parity(ours, nemo, [speechlike(3.0, 3)])


def test_encoder_config_is_read_from_the_nemo_and_checked():
    cfg = EncoderConfig.from_config({"_target_": "x.HiFiGANEncoder", "encoded_dim": 32, "down_sample_rates": [2, 4]})
    assert cfg.samples_per_frame == 8 and cfg.pad_mode == "reflect"  # NeMo's defaults fill the rest
    with pytest.raises(CodecLoadError, match="does not know"):
        EncoderConfig.from_config({"_target_": "x.HiFiGANEncoder", "encoded_dim": 32, "is_causal": True})
    with pytest.raises(CodecLoadError, match="HiFiGANEncoder only"):
        EncoderConfig.from_config({"_target_": "x.CausalHiFiGANEncoder", "encoded_dim": 32})
    with pytest.raises(CodecLoadError, match="no audio_encoder"):
        EncoderConfig.from_config(None)
