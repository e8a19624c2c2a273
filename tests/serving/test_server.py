"""The vLLM-Omni-style speech server on the tiny model: same audio as SynthesisSession (and as
`synth`, sample for sample) in every response shape, the official OpenAI SDK against it,
errors in OpenAI's shape, a 413 before the body is read, concurrent requests decoding together.
What is accepted or refused: tests/serving/test_conformance.py; hang-ups in every state:
tests/end_to_end/test_stop_surfaces.py."""

from __future__ import annotations

import io
import socket
import wave

import httpx
import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import free_port, serve_in_thread, tiny_codec, wait_for_port  # noqa: F401  (tiny_codec: fixture)
from tests.support.hold_fixtures import admitted_together

from gepard_demo.serving.protocol import iter_sse_events, pcm16_array, sse_audio
from gepard_demo.settings import StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest

TEXT = "Hello there, this is the served model."
FRAMES = 30
# A small fade and silence make the end shaping part of what must match.
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=7, fade_ms=5.0, silence_ms=20.0)
BODY_LIMIT = 64 * 1024


def _sampling(engine):
    # A random-weight stop head far from firing: every request runs its whole frame budget.
    return engine.default_sampling().replace(stop_threshold=0.99)


@pytest.fixture(scope="module")
def served_app(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    return build_speech_app(tiny_engine, tiny_codec, _sampling(tiny_engine), STREAM, max_body_bytes=BODY_LIMIT)


@pytest.fixture(scope="module")
def served(served_app):
    with serve_in_thread(served_app, "speech-server") as port:
        yield port


@pytest.fixture(scope="module")
def server(served):
    with httpx.Client(base_url=f"http://127.0.0.1:{served}", timeout=60) as client:
        yield client


def _speak(client, **fields):
    return client.post("/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "seed": 5, **fields})


def _pcm(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<i2")


def test_wav_equals_the_session_audio_and_synth_sample_for_sample(server, tiny_engine, tiny_codec, tiny_cache_dir, tmp_path):  # noqa: F811
    r = _speak(server, response_format="wav")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "audio/wav"
    assert r.headers["x-gepard-seed"] == "5" and r.headers["x-gepard-frames"] == str(FRAMES)
    with wave.open(io.BytesIO(r.content)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 22050)
        served = _pcm(w.readframes(w.getnframes()))
    session = SynthesisSession(
        tiny_engine, tiny_codec, SessionRequest(TEXT, _sampling(tiny_engine).replace(seed=5, max_frames=FRAMES), STREAM)
    )
    local = session.run()
    assert session.stats.frames == FRAMES and len(served) == len(local) > 0
    assert np.array_equal(served, pcm16_array(local))
    # `synth` with the same seed and settings writes the very same integers
    from gepard_demo.__main__ import main

    out = tmp_path / "synth.wav"
    assert main(["synth", TEXT, "-o", str(out), "--model", "tiny", "--cache-dir", str(tiny_cache_dir), "--seed", "5",
                 "--max-frames", str(FRAMES), "--stop-threshold", "0.99", "--first-chunk-frames", "4", "--chunk-frames", "7", "--fade-ms", "5",
                 "--silence-ms", "20"]) == 0
    synth, sr = sf.read(out, dtype="int16")
    assert sr == 22050 and np.array_equal(synth, served)


def test_every_response_shape_carries_the_same_samples(server):
    whole = _speak(server, response_format="pcm")
    assert whole.status_code == 200 and whole.headers["content-type"] == "audio/pcm"
    assert len(whole.content) == 2 * (FRAMES * 1024 + int(0.02 * 22050))  # speech + 20 ms silence

    # stream_format "audio": raw bytes, chunked as made
    with server.stream("POST", "/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "seed": 5,
                                                          "response_format": "pcm", "stream_format": "audio"}) as r:
        assert r.status_code == 200 and r.headers["x-gepard-seed"] == "5" and "content-length" not in r.headers
        raw = b"".join(r.iter_bytes())
    assert raw == whole.content

    # stream=true alone is SSE (vLLM-Omni's rule); a streamed WAV starts with a size-less header
    for fields in ({"stream": True}, {"stream_format": "sse"}):
        r = _speak(server, response_format="pcm", **fields)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), fields
        events = list(iter_sse_events(r.text.splitlines()))
        assert [e["type"] for e in events] == ["speech.audio.delta"] * (len(events) - 1) + ["speech.audio.done"]
        assert len(events) > 2 and events[-1]["gepard"]["frames"] == FRAMES
        assert b"".join(sse_audio(e) or b"" for e in events) == whole.content
    r = _speak(server, stream=True, stream_format="audio", response_format="wav")
    assert r.status_code == 200 and r.content[:4] == b"RIFF" and r.content[4:8] == b"\xff\xff\xff\xff"
    assert r.content[44:] == whole.content
    for fmt in ("flac", "mp3"):  # whole responses only, as in vLLM-Omni
        r = _speak(server, response_format=fmt)
        assert r.status_code == 200 and r.headers["content-type"] == f"audio/{'mpeg' if fmt == 'mp3' else fmt}"
        audio, sr = sf.read(io.BytesIO(r.content))
        assert sr == 22050 and abs(len(audio) - len(whole.content) // 2) < 3000  # mp3 pads its frames

    # an unseeded request still says which seed it drew, and replaying it gives the same audio
    r = server.post("/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "response_format": "pcm"})
    again = _speak(server, response_format="pcm", seed=int(r.headers["x-gepard-seed"]))
    assert again.content == r.content


def test_the_openai_sdk_speaks_to_it(served):
    import openai

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{served}/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list()] == ["tiny"]
    extra = {"max_new_tokens": FRAMES, "seed": 5}
    whole = client.audio.speech.create(model="tiny", voice="default", input=TEXT, response_format="pcm", extra_body=extra)
    pcm = whole.content
    assert len(pcm) > FRAMES * 2048

    with client.audio.speech.with_streaming_response.create(
            model="tiny", voice="default", input=TEXT, response_format="pcm", stream_format="audio", extra_body=extra) as r:
        chunks = list(r.iter_bytes())
        assert r.headers["content-type"] == "audio/pcm"
    assert b"".join(chunks) == pcm and len(chunks) > 1  # streamed, not buffered

    with client.audio.speech.with_streaming_response.create(
            model="tiny", voice="default", input=TEXT, response_format="pcm", stream_format="sse", extra_body=extra) as r:
        events = list(iter_sse_events(r.iter_lines()))
    assert b"".join(sse_audio(e) or b"" for e in events) == pcm

    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="tiny", voice="alloy", input=TEXT)
    assert e.value.body["param"] == "voice" and "default" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError):
        client.audio.speech.create(model="tiny", voice="default", input=TEXT, speed=1.5)
    with pytest.raises(openai.NotFoundError) as e:
        client.audio.speech.create(model="gpt-4o-mini-tts", voice="default", input=TEXT)
    assert "does not exist" in e.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("tiny")  # no such route: 404 in OpenAI's shape
    with pytest.raises(openai.APIStatusError) as e:
        client.audio.speech.create(model="tiny", voice="default", input="x" * (BODY_LIMIT + 1))
    assert e.value.status_code == 413 and "request body over" in e.value.body["message"]


@pytest.mark.parametrize("method, path, status", [
    ("GET", "/v1/nothing", 404), ("GET", "/v1/audio/speech", 405), ("DELETE", "/v1/models", 405),
    ("POST", "/v1/audio/speech", 400),
])
def test_errors_have_openai_shape_for_every_status(server, method, path, status):
    r = server.request(method, path, content=b"not json")
    assert r.status_code == status
    err = r.json()["error"]
    assert err["code"] == status and err["message"] and err["type"].endswith("Error") and "param" in err


def _raw_http(port: int, head: str, body: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(head.encode() + b"\r\n" + body)
    return sock


def test_oversized_body_is_413_before_it_is_read(served):
    # Announce 1 GB and send none of it: the answer must come anyway.
    sock = _raw_http(served, "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             "Content-Length: 1000000000\r\n")
    reply = ""
    with sock:
        while '"code"' not in reply and (data := sock.recv(65536)):
            reply += data.decode()
    assert reply.startswith("HTTP/1.1 413") and '"code":413' in reply
    # A chunked body (no Content-Length) is cut off once it passes the limit.
    sock = _raw_http(served, "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n")
    with sock:
        sock.sendall(b"400\r\n" + b"a" * 1024 + b"\r\n" * 1)
        for _ in range(BODY_LIMIT // 1024):
            sock.sendall(b"400\r\n" + b"a" * 1024 + b"\r\n")
        sock.sendall(b"0\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 413")


@pytest.fixture()
def batching_server(tiny_engine, tiny_codec):  # noqa: F811
    """The speech server of `served`, built with admission "cap": whether "realtime" (the
    default) admits a newcomer depends on this machine's measured speed (tests/batching/test_scheduler.py tests
    that rule), and a busy host measures slow. Built so, not patched after: the scheduler's wait
    line keeps the settings it was built with."""
    from gepard_demo.host_settings import BatchingSettings
    from gepard_demo.serving.server import build_speech_app

    app = build_speech_app(tiny_engine, tiny_codec, _sampling(tiny_engine), STREAM, max_body_bytes=BODY_LIMIT,
                           batching=BatchingSettings(max_batch=4, admission="cap"))
    with serve_in_thread(app, "speech-server-cap") as port:
        yield port, app.state.scheduler
    app.state.scheduler.close()


@pytest.mark.slow
@pytest.mark.numerics
def test_concurrent_requests_decode_together_and_each_equals_its_solo_run(batching_server, tiny_engine, tiny_codec):  # noqa: F811
    """Four seeded requests sent at once share the running batch (the scheduler's batch held all
    four, read inside it: a poll of the server's load from outside can miss the moment on a
    loaded host) and each gets the audio of its own request made alone (the same frames; the
    codec's shared calls round differently, by at most one step of s16)."""
    import threading

    port, scheduler = batching_server
    seeds, frames = [11, 12, 13, 14], 300
    out = {}
    clients = {seed: httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) for seed in seeds}
    for c in clients.values():
        assert c.get("/v1/models").status_code == 200

    def ask(seed):
        out[seed] = _pcm(_speak(clients[seed], response_format="pcm", seed=seed, max_new_tokens=frames).content)

    # They meet in the batch however fast the first one runs.
    with admitted_together(scheduler, len(seeds)) as meeting:
        threads = [threading.Thread(target=ask, args=(s,)) for s in seeds]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    for c in clients.values():
        c.close()
    assert sorted(out) == seeds
    assert meeting.peak == len(seeds), (meeting.peak, meeting.refusals)  # they ran together, not in turn
    for seed in seeds:
        session = SynthesisSession(
            tiny_engine,
            tiny_codec,
            SessionRequest(TEXT, _sampling(tiny_engine).replace(seed=seed, max_frames=frames), STREAM),
        )
        # The codec decoded the lined-up chunks together: float rounding, at most 1 LSB of s16.
        diff = np.abs(out[seed].astype(np.int32) - pcm16_array(session.run()).astype(np.int32))
        assert len(out[seed]) == frames * 1024 + 441 and diff.max() <= 1, seed


def test_pcm16_is_libsndfiles_conversion_chunk_by_chunk():
    """The one int16 conversion: floor(x * 32768), clipped (libsndfile's, which vLLM-Omni's
    soundfile encoding uses); element-wise, so chunks convert like the whole."""
    x = np.random.default_rng(0).uniform(-1.2, 1.2, 10_001).astype(np.float32)
    expected = np.clip(np.floor(x.astype(np.float64) * 32768), -32768, 32767).astype(np.int16)
    assert np.array_equal(pcm16_array(x), expected)
    assert b"".join(pcm16_array(c).tobytes() for c in np.array_split(x, 7)) == expected.tobytes()
    buf = io.BytesIO()
    sf.write(buf, x, 22050, format="WAV", subtype="PCM_16")  # what `sf.write(float)` would store
    assert np.array_equal(sf.read(io.BytesIO(buf.getvalue()), dtype="int16")[0], expected)


def test_a_fault_inside_the_engine_is_a_500_in_openai_shape(tiny_engine, tiny_codec):  # noqa: F811
    """A real fault (not a bad request) answers 500 with OpenAI's error body, naming the fault,
    and the server keeps serving."""
    from gepard_demo.serving.server import build_speech_app

    class BreaksOnce:  # the tiny codec, whose streamer breaks the first time
        broken = True

        def __getattr__(self, name):
            return getattr(tiny_codec, name)

        def streamer(self, **kw):
            if BreaksOnce.broken:
                BreaksOnce.broken = False
                raise RuntimeError("decoder exploded")
            return tiny_codec.streamer(**kw)

    app = build_speech_app(tiny_engine, BreaksOnce(), _sampling(tiny_engine), STREAM)
    with serve_in_thread(app, "broken-speech-server") as port, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        r = _speak(client)
        assert r.status_code == 500
        err = r.json()["error"]
        assert err["code"] == 500 and "decoder exploded" in err["message"] and err["type"].endswith("Error")
        assert _speak(client).status_code == 200
