"""The speech server's cloning fields end to end (vLLM-Omni's `ref_audio` as base64 or a data
URL, `ref_text` accepted and ignored) and our `cfg_scale` / `cfg_frames` extension fields."""

from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest
from tests.support.app_fixtures import free_port, serve_in_thread, tiny_codec, wait_for_port  # noqa: F401  (tiny_codec: fixture)
from tests.support.sound import voice_like, wav_bytes

from gepard_demo.model.checkpoints.tiny import TINY_CODEC_FILE
from gepard_demo.serving.protocol import pcm16
from gepard_demo.settings import StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

TEXT = "Say it in my voice."
FRAMES = 12
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)


@pytest.fixture(scope="module")
def prefixer(tiny_engine, tiny_model_dir):
    return SpeakerPrefixer.for_engine(tiny_engine, tiny_model_dir / TINY_CODEC_FILE)  # the tiny's own compressor


@pytest.fixture(scope="module")
def server(tiny_engine, tiny_codec, prefixer):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling(), STREAM, prefixer=prefixer)
    with serve_in_thread(app, "speech-server-cloning") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client


REF = wav_bytes(voice_like(4.0, seed=7))
REF_B64 = base64.b64encode(REF).decode()


def _speak(client, **fields):
    return client.post("/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "seed": 5, "response_format": "pcm", **fields})


def test_cloned_voice_end_to_end(server, prefixer, tiny_engine, tiny_codec):  # noqa: F811
    default = _speak(server)
    cloned = _speak(server, ref_audio=REF_B64, ref_text="whatever was said", task_type="Base")
    assert cloned.status_code == 200, cloned.text
    assert cloned.headers["x-gepard-ref-text"] == "ignored"
    assert cloned.content != default.content  # the reference changed the voice
    misses = prefixer.misses
    as_data_url = _speak(server, ref_audio="data:audio/wav;base64," + REF_B64)
    assert as_data_url.content == cloned.content and "x-gepard-ref-text" not in as_data_url.headers
    assert prefixer.misses == misses and prefixer.hits >= 1  # the same recording: prefix from the cache
    # the served audio is the session's with that prefix
    speaker = prefixer.from_bytes(REF).tokens
    s = tiny_engine.default_sampling().replace(seed=5, max_frames=FRAMES)
    local = SynthesisSession(tiny_engine, tiny_codec, SessionRequest(TEXT, s, STREAM, speaker=speaker)).run()
    assert cloned.content == pcm16(local)  # the session's audio, as the server encodes it


def test_cfg_extension_fields(server, tiny_engine, tiny_codec):  # noqa: F811
    guided = _speak(server, cfg_scale=2.5, cfg_frames=6)
    assert guided.status_code == 200, guided.text
    s = tiny_engine.default_sampling().replace(seed=5, max_frames=FRAMES, cfg_scale=2.5, cfg_frames=6)
    local = SynthesisSession(tiny_engine, tiny_codec, SessionRequest(TEXT, s, STREAM)).run()
    assert guided.content == pcm16(local)
    assert guided.content != _speak(server).content


@pytest.mark.parametrize("fields, param, words", [
    ({"ref_audio": base64.b64encode(wav_bytes(np.zeros(22050 * 4, np.float32))).decode()}, "ref_audio", "silent"),
    ({"ref_audio": base64.b64encode(wav_bytes(voice_like(1.0))).decode()}, "ref_audio", "too short"),
    ({"ref_audio": base64.b64encode(wav_bytes(voice_like(16.0))).decode()}, "ref_audio", "too long"),
    ({"ref_audio": base64.b64encode(b"%PDF-1.4 not audio at all" * 40).decode()}, "ref_audio", "not readable audio"),
    ({"ref_audio": "@@@ not base64"}, "ref_audio", "base64"),
    ({"ref_audio": "https://example.com/me.wav"}, "ref_audio", "not fetched"),
    ({"ref_audio": "data:image/png;base64," + REF_B64}, "ref_audio", "not audio"),
    ({"ref_audio": REF_B64, "task_type": "CustomVoice"}, "task_type", "Base"),
    ({"ref_text": 3}, "ref_text", "string"),
    ({"cfg_scale": 20}, "cfg_scale", "[0, 10]"),
    ({"cfg_scale": "2"}, "cfg_scale", "number"),
    ({"cfg_frames": 0}, "cfg_frames", "cfg_frames"),
    ({"cfg_frames": 2.5}, "cfg_frames", "integer"),
])
def test_bad_cloning_fields_are_400_naming_the_field(server, fields, param, words):
    r = _speak(server, **fields)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err
    assert _speak(server).status_code == 200  # and it keeps serving

