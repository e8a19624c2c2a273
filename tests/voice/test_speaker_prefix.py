"""Reference audio in, speaker prefix out: formats, rates, channels, the length window, every bad
input, and the content-hash cache. The compressor is the tiny checkpoint's own (`ref_compressor.*`
and `voice_cloning` in its files); the codec is the tiny NanoCodec (encoder weights as NeMo lays
them out)."""

import base64
import json
import threading

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from tests.voice.test_compressor import TINY

from gepard_demo.model.checkpoints.tiny import TINY_CODEC_FILE
from gepard_demo.voice.compressor import CompressorError
from gepard_demo.voice.reference_audio import ReferenceAudioError, decode_base64_audio, prepare_reference
from gepard_demo.voice.speaker_prefix import SpeakerPrefixer
from tests.support.sound import RATE, voice_like, wav_bytes


@pytest.fixture()
def prefixer(tiny_engine, tiny_model_dir):
    return SpeakerPrefixer.for_engine(tiny_engine, tiny_model_dir / TINY_CODEC_FILE)


def test_prefix_shape_and_cache_hit(prefixer, monkeypatch):
    data = wav_bytes(voice_like(5.0))
    calls = []
    real = prefixer.encoder.encode
    monkeypatch.setattr(prefixer.encoder, "encode", lambda a: calls.append(len(a)) or real(a))
    first = prefixer.from_bytes(data)
    assert first.tokens.shape == (TINY.num_queries, TINY.d_model)
    assert first.frames == int(np.ceil(first.seconds * RATE / 1024))
    again = prefixer.from_bytes(data)
    assert again is first and (prefixer.hits, prefixer.misses) == (1, 1) and len(calls) == 1
    other = prefixer.from_bytes(wav_bytes(voice_like(5.0, f0=220.0)))
    assert len(calls) == 2 and not torch.allclose(other.tokens, first.tokens)


def test_a_reference_in_flight_is_computed_once(prefixer, monkeypatch):
    """The app prepares a reference on upload; a Generate that arrives meanwhile waits for that
    computation instead of running the encoder a second time. A failure reaches both."""
    data = wav_bytes(voice_like(5.0, f0=180.0))
    started, release, calls = threading.Event(), threading.Event(), []
    real = prefixer.encoder.encode

    def slow_encode(a):
        calls.append(len(a))
        started.set()
        release.wait(10)
        return real(a)

    monkeypatch.setattr(prefixer.encoder, "encode", slow_encode)
    results = []
    first = threading.Thread(target=lambda: results.append(prefixer.from_bytes(data)))
    first.start()
    assert started.wait(10)
    second = threading.Thread(target=lambda: results.append(prefixer.from_bytes(data)))
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting on the first computation, not encoding again
    release.set()
    first.join(10), second.join(10)
    assert len(calls) == 1 and len(results) == 2 and results[0] is results[1] and prefixer.misses == 1

    bad = wav_bytes(np.zeros(RATE * 5, np.float32))  # silence: refused, and the refusal is not cached
    errors = []
    threads = [threading.Thread(target=lambda: errors.append(_error(lambda: prefixer.from_bytes(bad)))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(errors) == 2 and all(isinstance(e, ReferenceAudioError) for e in errors)
    assert not prefixer._pending


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001  returned to the test
        return e
    return None


def test_any_rate_channels_and_format_give_the_same_voice(prefixer):
    mono = voice_like(6.0)
    base = prefixer.compute(mono, RATE).tokens
    stereo_44k = np.stack([voice_like(6.0, 44100)] * 2, axis=1)
    flac = prefixer.from_bytes(wav_bytes(stereo_44k, 44100, "FLAC"))
    assert abs(flac.seconds - 6.0) < 0.05
    # a different rate and container: close in the compressor's output, though resampling is not bit exact
    assert torch.nn.functional.cosine_similarity(flac.tokens.flatten(), base.flatten(), dim=0) > 0.9
    mic = (voice_like(6.0, 48000) * 32767).astype(np.int16)  # what Gradio's microphone hands over
    assert prefixer.from_array(mic, 48000).seconds == pytest.approx(6.0, abs=0.05)
    ogg = prefixer.from_bytes(wav_bytes(mono, RATE, "OGG", "VORBIS"))
    assert ogg.frames == int(np.ceil(ogg.seconds * RATE / 1024))


def test_edge_silence_is_trimmed_before_the_window_is_checked():
    rate = 16000
    padded = np.concatenate([np.zeros(rate * 2, np.float32), voice_like(4.0, rate), np.zeros(rate * 3, np.float32)])
    ref = prepare_reference(padded, rate)
    assert abs(ref.size / RATE - 4.0) < 0.05


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: wav_bytes(np.zeros(RATE * 5, np.float32)), "silent"),
        (lambda: wav_bytes(1e-5 * np.ones(RATE * 5, np.float32)), "silent"),
        (lambda: wav_bytes(voice_like(1.5)), "too short"),
        (lambda: wav_bytes(voice_like(20.0)), "too long"),
        (lambda: b"", "empty"),
        (lambda: b"RIFF\x00\x00\x00\x00WAVEfmt garbage", "not readable audio"),
        (lambda: b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8, "not readable audio"),
        (lambda: "just some text, not a recording\n".encode() * 50, "not readable audio"),
    ],
    ids=["silence", "near-silence", "too-short", "too-long", "empty", "broken-wav", "png", "text"],
)
def test_bad_reference_audio_is_refused_clearly(prefixer, make, match):
    with pytest.raises(ReferenceAudioError, match=match):
        prefixer.from_bytes(make())
    assert prefixer.misses == 0  # nothing half-made was cached


def test_bad_arrays_and_missing_files(prefixer, tmp_path):
    with pytest.raises(ReferenceAudioError, match="NaN"):
        prefixer.from_array(np.full(RATE * 4, np.nan, np.float32), RATE)
    with pytest.raises(ReferenceAudioError, match="not found"):
        prefixer.from_file(tmp_path / "nope.wav")
    with pytest.raises(ReferenceAudioError, match="sample rate"):
        prefixer.from_array(voice_like(4.0), 0)


def test_base64_and_data_url_fields():
    data = wav_bytes(voice_like(4.0))
    b64 = base64.b64encode(data).decode()
    assert decode_base64_audio(b64) == data
    assert decode_base64_audio("data:audio/wav;base64," + b64) == data
    for bad, match in [("", "non-empty"), ("not base64!!", "base64"), ("data:text/plain;base64," + b64, "not audio"),
                       ("data:audio/wav," + b64, "base64-encoded"), ("https://example.com/a.wav", "not fetched")]:
        with pytest.raises(ReferenceAudioError, match=match):
            decode_base64_audio(bad)


def test_a_checkpoint_without_cloning_says_so(tiny_model_dir, tmp_path):
    (tmp_path / "gepard_config.json").write_text(json.dumps({"voice_cloning": {"enabled": False}}))
    with pytest.raises(CompressorError, match="without voice cloning"):
        SpeakerPrefixer.load(tmp_path, tiny_model_dir / TINY_CODEC_FILE, hidden_size=TINY.d_model)
    (tmp_path / "gepard_config.json").write_text(json.dumps({"voice_cloning": {"enabled": True}}))
    save_file({"model.norm.weight": torch.ones(4)}, str(tmp_path / "model.safetensors"))
    with pytest.raises(CompressorError, match="no ref_compressor"):
        SpeakerPrefixer.load(tmp_path, tiny_model_dir / TINY_CODEC_FILE, hidden_size=TINY.d_model)


def test_tiny_checkpoint_compressor_matches_the_independent_reference(prefixer, tiny_model_dir):
    """Compressor semantics on the tiny checkpoint's real `ref_compressor.*` weights."""
    from tests.voice.test_compressor import random_codes, reference_forward

    from gepard_demo.voice.compressor import CompressorConfig
    from gepard_demo.voice.speaker_prefix import read_compressor_state

    cfg = prefixer.compressor.cfg
    assert cfg == CompressorConfig(num_queries=8, num_layers=2, num_heads=2, d_model=64, ffn_hidden_size_multiplier=4)
    state = read_compressor_state(tiny_model_dir)
    codes = random_codes(150, seed=4)
    got = prefixer.prefix_from_codes(codes)
    ref = reference_forward(state, cfg, codes.unsqueeze(0))[0]
    assert torch.allclose(got, ref, atol=1e-5), (got - ref).abs().max()
    # the prefix goes where null_prefix went: same shape
    assert got.shape == tuple(state["ref_compressor.queries"].shape)
