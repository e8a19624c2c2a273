"""The vLLM-Omni-style speech server on the tiny model: same audio as SynthesisSession, in
every response shape, and clear 400s that leave it serving."""

from __future__ import annotations

import base64
import io
import json
import threading
import wave

import httpx
import numpy as np
import pytest

from app_fixtures import free_port, tiny_codec, wait_for_port  # noqa: F401  (tiny_codec: fixture)
from gepard_demo.settings import StreamSettings
from gepard_demo.streaming import SynthesisSession

TEXT = "Hello there, this is the served model."
FRAMES = 30
# A small fade and silence make the end shaping part of what must match.
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=7, fade_ms=5.0, silence_ms=20.0)


@pytest.fixture(scope="module")
def server(tiny_engine, tiny_codec):  # noqa: F811
    import uvicorn

    from gepard_demo.speech_server import build_speech_app

    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling(), STREAM)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=srv.run, name="speech-server", daemon=True)
    thread.start()
    wait_for_port(port)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        yield client
    srv.should_exit = True
    thread.join(10)


def _speak(client, **fields):
    return client.post("/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "seed": 5, **fields})


def _pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2")


def test_wav_equals_the_session_audio(server, tiny_engine, tiny_codec):  # noqa: F811
    r = _speak(server, response_format="wav")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"
    assert r.headers["x-gepard-seed"] == "5" and r.headers["x-gepard-frames"] == str(FRAMES)
    with wave.open(io.BytesIO(r.content)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 22050)
        served = _pcm(w.readframes(w.getnframes())).astype(np.float32) / 32768.0
    session = SynthesisSession(tiny_engine, tiny_codec, TEXT, tiny_engine.default_sampling().replace(seed=5, max_frames=FRAMES), STREAM)
    local = np.clip(session.run(), -1, 1)
    assert session.stats.frames == FRAMES
    assert len(served) == len(local) > 0
    assert np.max(np.abs(served - local)) <= 0.5 / 32768 + 1e-6  # int16 rounding only


def test_streamed_pcm_and_sse_equal_the_whole_pcm(server):
    whole = _speak(server, response_format="pcm")
    assert whole.status_code == 200 and whole.headers["content-type"] == "audio/pcm"
    assert len(whole.content) == 2 * (FRAMES * 1024 + int(0.02 * 22050))  # speech + 20 ms silence

    with server.stream("POST", "/v1/audio/speech",
                       json={"input": TEXT, "max_new_tokens": FRAMES, "seed": 5, "response_format": "pcm", "stream": True}) as r:
        assert r.status_code == 200 and r.headers["x-gepard-seed"] == "5"
        raw = b"".join(r.iter_bytes())
    assert raw == whole.content

    r = _speak(server, response_format="pcm", stream=True, stream_format="sse")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[len("data: "):]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events[:-1]] == ["speech.audio.delta"] * (len(events) - 1) and len(events) > 2
    assert events[-1]["type"] == "speech.audio.done" and events[-1]["gepard"]["frames"] == FRAMES
    assert b"".join(base64.b64decode(e["audio"]) for e in events[:-1]) == whole.content

    # an unseeded request still says which seed it drew, and replaying it gives the same audio
    r = server.post("/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "response_format": "pcm"})
    again = _speak(server, response_format="pcm", seed=int(r.headers["x-gepard-seed"]))
    assert again.content == r.content


@pytest.mark.parametrize("fields, param, words", [
    ({"speed": 1.5}, "speed", "speed"),
    ({"extra_params": {"temperature": 0.9}}, "extra_params", "fixed per server"),
    ({"ref_audio": "data:audio/wav;base64,AAAA"}, "ref_audio", "cloning"),
    ({"ref_text": "hi"}, "ref_text", "cloning"),
    ({"voice": "alloy"}, "voice", "default"),
    ({"response_format": "mp3"}, "response_format", "wav"),
    ({"response_format": "flac"}, "response_format", "flac"),
    ({"response_format": "opus"}, "response_format", "pcm"),
    ({"response_format": "wav", "stream": True}, "response_format", "streaming"),
    ({"stream_format": "chunks"}, "stream_format", "sse"),
    ({"max_new_tokens": 0}, "max_new_tokens", "[1, 4096]"),
    ({"max_new_tokens": 4097}, "max_new_tokens", "[1, 4096]"),
    ({"seed": -1}, "seed", "seed"),
    ({"input": ""}, "input", "empty"),
    ({"input": "\u200b \n"}, "input", "empty"),
    ({"temperature": 0.9}, "temperature", "unknown"),
])
def test_rejected_fields_are_400_and_the_server_keeps_serving(server, fields, param, words):
    r = _speak(server, **fields)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"] and err["code"] == 400


def test_models_and_recovery(server):
    assert server.post("/v1/audio/speech", content=b"not json").status_code == 400
    assert _speak(server, model="someone/else").status_code == 404
    models = server.get("/v1/models").json()["data"]
    assert models[0]["id"] == "tiny" and models[0]["random_weights"] is True
    assert models[0]["fixed_settings"]["stream"]["chunk_frames"] == 7
    ok = _speak(server, model="tiny", response_format="pcm", speed=1.0, voice="default")
    assert ok.status_code == 200 and len(ok.content) > 0


def test_a_client_that_hangs_up_frees_the_engine(server):
    with server.stream("POST", "/v1/audio/speech",
                       json={"input": TEXT, "max_new_tokens": 400, "response_format": "pcm", "stream": True}) as r:
        next(r.iter_bytes())  # first chunk, then hang up mid-utterance
    # the next request is served (it would wait forever if the engine lock leaked)
    assert _speak(server, response_format="pcm").status_code == 200
