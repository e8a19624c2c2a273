"""The speech server's operations surface, on real servers: /health (and a dead engine's 503),
/metrics (vLLM's names, counts that move with real requests: completed, refused, cancelled),
/version, vLLM's --served-model-name, --api-key (REST and the WebSocket; $VLLM_API_KEY) and CORS,
and the error texts of issue 64 (unknown field, unknown voice, bad reference audio)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from importlib.metadata import version

import httpx
import numpy as np
import pytest
import websockets
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)
from tests.support.hold_fixtures import ENDLESS_SEED
from prometheus_client.parser import text_string_to_metric_families
from tests.support.sound import voice_like, wav_bytes

from gepard_demo.__main__ import build_parser
from gepard_demo.host_settings import ServerSettings
from gepard_demo.model.checkpoints.tiny import TINY_CODEC_FILE
from gepard_demo.model.seams import WrappedEngine
from gepard_demo.serving.protocol import DEFAULT_VOICE, EXTENSION_FIELDS, VOICES_PATH
from gepard_demo.serving.stream_protocol import STREAM_PATH
from gepard_demo.serving.voices import VoiceShelf
from gepard_demo.settings import StreamSettings
from gepard_demo.settings_flags import server_from_args
from gepard_demo.voice.library import VoiceLibrary
from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

TEXT = "Say it."
FRAMES = 12
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)
KEY = "s3cret-key"
NAME = "gepard-tiny"
ORIGIN = "https://app.example"
AUTH = {"Authorization": f"Bearer {KEY}"}
CLIP = wav_bytes(voice_like(4.0, seed=7))


@pytest.fixture(scope="module")
def prefixer(tiny_engine, tiny_model_dir):
    return SpeakerPrefixer.for_engine(tiny_engine, tiny_model_dir / TINY_CODEC_FILE)


def _app(engine, codec, prefixer=None, folder=None, server=ServerSettings()):
    from gepard_demo.serving.server import build_speech_app

    voices = None if folder is None else VoiceShelf(VoiceLibrary(folder, reserved=(DEFAULT_VOICE,)), prefixer)
    return build_speech_app(engine, codec, engine.default_sampling(), STREAM, prefixer=prefixer, voices=voices,
                            server=server)


@pytest.fixture(scope="module")
def guarded(tiny_engine, tiny_codec, prefixer, tmp_path_factory):  # noqa: F811
    """A server with every access setting: a served name, a key and one allowed origin."""
    settings = ServerSettings(served_model_name=NAME, api_key=KEY, allowed_origins=(ORIGIN,))
    app = _app(tiny_engine, tiny_codec, prefixer, tmp_path_factory.mktemp("voices"), settings)
    with serve_in_thread(app, "ops-guarded") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client, port


@pytest.fixture(scope="module")
def plain(tiny_engine, tiny_codec, prefixer, tmp_path_factory):  # noqa: F811
    """A server on vLLM's defaults: no key, every origin; with voices and cloning."""
    app = _app(tiny_engine, tiny_codec, prefixer, tmp_path_factory.mktemp("voices"))
    with serve_in_thread(app, "ops-plain") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client, port


def _speak(client, headers=None, **fields):
    body = {"input": TEXT, "max_new_tokens": FRAMES, "seed": 5, "response_format": "pcm", **fields}
    return client.post("/v1/audio/speech", json=body, headers=headers)


def _metrics(client) -> dict:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("model_name", "le"))))] = s.value
    return out


def _count(m: dict, name: str, **labels) -> float:
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


# -- /health, /version -------------------------------------------------------------------------


def test_health_is_the_wheels_body_and_a_closed_engine_is_503(tiny_engine, tiny_codec):  # noqa: F811
    app = _app(tiny_engine, tiny_codec)
    with serve_in_thread(app, "ops-health") as port, httpx.Client(base_url=f"http://127.0.0.1:{port}") as c:
        assert (c.get("/health").status_code, c.get("/health").json()) == (200, {"status": "healthy"})
        assert _speak(c).status_code == 200  # the scheduler's thread runs now: still healthy
        assert c.get("/health").status_code == 200
        app.state.scheduler.close()
        r = c.get("/health")
        assert (r.status_code, r.json()) == (503, {"status": "unhealthy"})
        assert _speak(c).status_code == 500  # and truly nothing is served


class _LostDevice(WrappedEngine):
    """The engine as a lost GPU leaves it: every new batch fails, outside any one request's step."""

    def new_batch(self):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # its death is the point
def test_health_is_503_once_the_schedulers_thread_died(tiny_engine, tiny_codec):  # noqa: F811
    with serve_in_thread(_app(_LostDevice(tiny_engine), tiny_codec), "ops-dead") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
            assert c.get("/health").status_code == 200  # not started yet: nothing has failed
            r = _speak(c)
            assert r.status_code == 500 and "scheduler" in r.json()["error"]["message"], r.text
            assert c.get("/health").json() == {"status": "unhealthy"}
            assert c.get("/health").status_code == 503


def test_version_names_the_protocol(plain):
    client, _ = plain
    r = client.get("/version")  # the protocol is the installed reference wheel's
    assert r.status_code == 200 and r.json() == {"version": "gepard-demo", "protocol": f"vllm-omni=={version('vllm-omni')}"}


# -- /metrics ----------------------------------------------------------------------------------


def test_metrics_count_completed_refused_and_cancelled_requests(plain):
    client, port = plain
    before = _metrics(client)
    assert ("vllm:num_requests_running", ()) in before and ("vllm:num_requests_waiting", ()) in before
    assert _speak(client).status_code == 200
    assert _speak(client, bogus=1).status_code == 400
    assert _speak(client, voice="nobody").status_code == 400
    with client.stream("POST", "/v1/audio/speech", json={"input": TEXT, "seed": ENDLESS_SEED, "max_new_tokens": 4096,
                                                         "response_format": "pcm", "stream_format": "audio"}) as r:
        assert r.status_code == 200 and next(r.iter_bytes())  # audio is flowing: then hang up
    deadline = asyncio.run(_until(lambda: _count(_metrics(client), "gepard:requests_total", outcome="cancelled")
                                  > _count(before, "gepard:requests_total", outcome="cancelled")))
    assert deadline, "the hung-up request was never counted"
    after = _metrics(client)

    def moved(name, **labels):
        return _count(after, name, **labels) - _count(before, name, **labels)

    assert moved("gepard:requests_total", outcome="completed") == 1
    assert moved("gepard:requests_total", outcome="refused") == 2
    assert moved("gepard:requests_total", outcome="cancelled") == 1
    assert moved("vllm:request_success_total", finished_reason="abort") == 1
    ended = sum(moved("vllm:request_success_total", finished_reason=r) for r in ("stop", "length", "force_stop"))
    assert ended == 1  # the completed one, by how it ended
    assert moved("gepard:time_to_first_audio_seconds_count") == 2  # both made audio
    assert moved("gepard:real_time_factor_count") == 1  # only a completed request has a real-time factor
    assert moved("vllm:e2e_request_latency_seconds_count") == 1  # a completed request's
    assert _count(after, "vllm:num_requests_running") == 0


def test_metrics_count_websocket_units(plain):
    client, port = plain
    before = _metrics(client)

    asyncio.run(_one_unit(port))
    assert asyncio.run(_until(lambda: _count(_metrics(client), "gepard:requests_total", outcome="completed")
                              > _count(before, "gepard:requests_total", outcome="completed")))


def test_a_unit_still_closing_when_the_client_hangs_up_is_counted(plain, monkeypatch):
    """A slow host: the unit's session is still closing on its worker thread when the client,
    told session.done, hangs up; the hang-up cancels the unit's task natively, which an anyio
    shield does not hold off. The unit completed and is counted so."""
    from gepard_demo.streaming.session import SynthesisSession

    slow_close, closing = SynthesisSession.close, []

    def close(self):
        closing.append(1)
        time.sleep(1.0)
        slow_close(self)

    monkeypatch.setattr(SynthesisSession, "close", close)
    client, port = plain
    before = _metrics(client)

    asyncio.run(_one_unit(port))  # it hangs up at session.done, the unit's close still sleeping
    assert asyncio.run(_until(lambda: bool(closing), timeout_s=30)), "the unit never closed"
    assert asyncio.run(_until(lambda: _count(_metrics(client), "gepard:requests_total", outcome="completed")
                              > _count(before, "gepard:requests_total", outcome="completed"), timeout_s=30))
    assert _count(_metrics(client), "vllm:num_requests_running") == 0


async def _one_unit(port: int) -> None:
    """One utterance of one unit over the WebSocket, read to its session.done; then the client hangs up."""
    async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}", max_size=None) as ws:
        for m in ({"type": "session.config", "response_format": "pcm", "stream_audio": True, "seed": 3,
                   "max_new_tokens": FRAMES}, {"type": "input.text", "text": "One."}, {"type": "input.done"}):
            await ws.send(json.dumps(m))
        while not isinstance(m := await asyncio.wait_for(ws.recv(), 120), str) or \
                json.loads(m)["type"] != "session.done":
            pass


async def _until(check, timeout_s: float = 60.0) -> bool:
    """Whether `check()` comes true within timeout_s (a request's end is counted after its answer)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while loop.time() < end:
        if await asyncio.to_thread(check):
            return True
        await asyncio.sleep(0.1)
    return False


def test_each_server_counts_its_own(tiny_engine, tiny_codec, plain):  # noqa: F811
    from gepard_demo.serving.operations import ServerMetrics

    a = ServerMetrics(_app(tiny_engine, tiny_codec).state.scheduler, "a")
    b = ServerMetrics(_app(tiny_engine, tiny_codec).state.scheduler, "a")  # the same names: no clash
    a.refused()
    assert b"outcome=\"refused\"} 1.0" in a.render() and b"outcome=\"refused\"} 0.0" in b.render()


# -- --served-model-name -----------------------------------------------------------------------


def test_served_model_name_is_the_id_and_the_path_is_refused_as_vllm_refuses_it(guarded, tiny_engine):
    client, _ = guarded
    listed = client.get("/v1/models", headers=AUTH).json()["data"]
    assert [m["id"] for m in listed] == [NAME] and listed[0]["root"] == tiny_engine.model_info.path
    assert _speak(client, AUTH, model=NAME).status_code == 200
    assert _speak(client, AUTH).status_code == 200  # no model: the served one, as vLLM
    r = _speak(client, AUTH, model=tiny_engine.model_info.name)
    assert r.status_code == 404 and r.json()["error"]["param"] == "model" and NAME in r.json()["error"]["message"]


# -- --api-key, CORS ---------------------------------------------------------------------------


def test_api_key_guards_every_v1_route_as_vllm_does(guarded):
    client, _ = guarded
    for method, path in (("GET", "/v1/models"), ("GET", VOICES_PATH), ("POST", "/v1/audio/speech"),
                         ("DELETE", f"{VOICES_PATH}/x")):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": f"Basic {KEY}"}):
            r = client.request(method, path, headers=headers, json={"input": TEXT})
            assert (r.status_code, r.json()) == (401, {"error": "Unauthorized"}), (method, path, headers)
    assert client.get("/v1/models", headers={"Authorization": f"bearer {KEY}"}).status_code == 200  # scheme: any case
    assert _speak(client, AUTH).status_code == 200
    for path in ("/health", "/metrics", "/version"):  # open to probes and scrapers, as vLLM's
        assert client.get(path).status_code == 200, path


def test_api_key_guards_the_websocket(guarded):
    _, port = guarded
    url = f"ws://127.0.0.1:{port}{STREAM_PATH}"

    async def refused(headers):
        try:
            async with websockets.connect(url, additional_headers=headers):
                return None
        except websockets.InvalidStatus as exc:
            return exc.response.status_code, json.loads(exc.response.body)

    async def spoken():
        async with websockets.connect(url, additional_headers=AUTH, max_size=None) as ws:
            for m in ({"type": "session.config", "response_format": "pcm", "stream_audio": True, "seed": 3,
                       "max_new_tokens": FRAMES}, {"type": "input.text", "text": "One."}, {"type": "input.done"}):
                await ws.send(json.dumps(m))
            audio = b""
            while not isinstance(m := await asyncio.wait_for(ws.recv(), 120), str) or \
                    json.loads(m)["type"] != "session.done":
                audio += m if isinstance(m, bytes) else b""
            return audio

    assert asyncio.run(refused({})) == (401, {"error": "Unauthorized"})
    assert asyncio.run(refused({"Authorization": "Bearer wrong"})) == (401, {"error": "Unauthorized"})
    assert len(asyncio.run(spoken())) > 0


def test_api_key_comes_from_the_flag_else_vllms_env_var():
    parse = build_parser().parse_args
    assert server_from_args(parse(["serve"]), {}).api_key is None
    assert server_from_args(parse(["serve"]), {"VLLM_API_KEY": "env"}).api_key == "env"
    assert server_from_args(parse(["serve", "--api-key", "flag"]), {"VLLM_API_KEY": "env"}).api_key == "flag"
    assert server_from_args(parse(["serve"]), {"VLLM_API_KEY": ""}).api_key is None
    got = server_from_args(parse(["serve", "--served-model-name", NAME, "--allowed-origins", f'["{ORIGIN}"]',
                                  "--allowed-methods", '["GET", "POST"]', "--allow-credentials"]), {})
    assert got == ServerSettings(served_model_name=NAME, allowed_origins=(ORIGIN,), allowed_methods=("GET", "POST"),
                                 allow_credentials=True)
    with pytest.raises(SystemExit):
        parse(["serve", "--allowed-origins", ORIGIN])  # not a JSON list: a usage error, as vLLM's json.loads


def test_cors_defaults_to_vllms_and_takes_allowed_origins(plain, guarded):
    preflight = {"Origin": "https://elsewhere.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type"}
    r = plain[0].options("/v1/audio/speech", headers=preflight)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    r = guarded[0].options("/v1/audio/speech", headers=preflight)  # an origin not allowed
    assert r.status_code == 400 and "access-control-allow-origin" not in r.headers
    r = guarded[0].options("/v1/audio/speech", headers={**preflight, "Origin": ORIGIN})  # no key needed to ask
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == ORIGIN
    r = guarded[0].get("/v1/models", headers={"Origin": ORIGIN})  # a refusal a browser page can read
    assert r.status_code == 401 and r.headers["access-control-allow-origin"] == ORIGIN


# -- error texts (issue 64) --------------------------------------------------------------------


def test_unknown_field_lists_every_field_the_server_takes(plain):
    r = _speak(plain[0], temprature=0.5)
    message = r.json()["error"]["message"]
    assert r.status_code == 400 and r.json()["error"]["param"] == "temprature"
    for name in ("input", "voice", "seed", "max_new_tokens", "ref_audio", "ref_text", "task_type", *EXTENSION_FIELDS):
        assert name in message, (name, message)
    for r_name in ("language", "instructions", "extra_params"):  # refused whenever given: not "taken"
        assert f" {r_name}," not in message and not message.endswith(r_name)
    for name in EXTENSION_FIELDS:  # and each one listed is taken
        assert _speak(plain[0], **{name: None}).status_code == 200, name


def test_unknown_voice_names_the_voices_there_are(plain):
    client, _ = plain
    assert client.post(VOICES_PATH, data={"name": "Alice", "consent": "rec-1"},
                       files={"audio_sample": ("me.wav", CLIP, "audio/wav")}).status_code == 200
    r = _speak(client, voice="nobody")
    message = r.json()["error"]["message"]
    assert r.status_code == 400 and r.json()["error"]["param"] == "voice"
    listed = client.get(VOICES_PATH).json()["voices"]
    assert "no built-in speakers" not in message and all(f"'{v}'" in message for v in listed), message
    assert DEFAULT_VOICE in listed and "alice" in listed
    client.delete(f"{VOICES_PATH}/Alice")


def _bad_clips() -> dict[str, bytes]:
    flac = wav_bytes(voice_like(4.0, seed=7), fmt="FLAC")
    return {"junk": b"not audio at all " * 64, "truncated flac": flac[: len(flac) // 2], "flac header": flac[:200],
            "wav header only": CLIP[:44], "empty-looking riff": b"RIFF\x00\x00\x00\x00WAVE"}


def _no_repr(message: str) -> bool:
    return "<_io" not in message and " at 0x" not in message and "object at" not in message


def test_bad_reference_audio_is_a_400_without_a_python_repr_on_every_path(plain):
    client, port = plain
    messages = {}
    for kind, clip in _bad_clips().items():
        b64 = base64.b64encode(clip).decode()
        r = _speak(client, ref_audio="data:audio/flac;base64," + b64)
        assert r.status_code == 400 and r.json()["error"]["param"] == "ref_audio", (kind, r.text)
        messages[("rest", kind)] = r.json()["error"]["message"]
        r = client.post(VOICES_PATH, data={"name": "Bad", "consent": "rec-1"},
                        files={"audio_sample": ("me.flac", clip, "audio/flac")})
        assert r.status_code == 400, (kind, r.text)
        messages[("upload", kind)] = r.json()["error"]["message"]
        messages[("websocket", kind)] = asyncio.run(_ws_config_error(port, b64))
    assert all(_no_repr(m) and "audio" in m for m in messages.values()), messages
    assert all(m.startswith("Invalid session config: ref_audio") for (path, _), m in messages.items() if path == "websocket")


async def _ws_config_error(port: int, ref_b64: str) -> str:
    async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}", max_size=None) as ws:
        await ws.send(json.dumps({"type": "session.config", "response_format": "pcm", "stream_audio": True,
                                  "ref_audio": ref_b64}))
        m = json.loads(await asyncio.wait_for(ws.recv(), 60))
        assert m["type"] == "error", m
        return m["message"]


def test_deploy_documents_every_server_flag_and_route():
    from pathlib import Path

    from gepard_demo.declare import declared

    deploy = (Path(__file__).resolve().parents[3] / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    for name in declared(ServerSettings):
        assert "--" + name.replace("_", "-") in deploy, name
    for route in ("GET /health", "GET /metrics", "GET /version", "VLLM_API_KEY"):
        assert route in deploy, route
