"""Saved voices on the speech server: vLLM-Omni 0.30's /v1/audio/voices routes (their paths,
fields, JSON shapes and error texts read from the wheel), `voice: "<name>"` in a request and in
the WebSocket's config, a voice equal to its clip sent as `ref_audio`, a restart, a deletion
mid-request, bad uploads refused with nothing stored."""

from __future__ import annotations

import asyncio
import base64
import json
import threading

import httpx
import numpy as np
import pytest
import websockets
from app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)
from test_speaker_prefix import voice_like, wav_bytes
from vllm_omni_reference import api_server_source, serving_source, upload_result_keys, voice_listing_keys, voice_routes

from gepard_demo.model.checkpoints.tiny import TINY_CODEC_FILE
from gepard_demo.serving.protocol import DEFAULT_VOICE, VOICES_PATH
from gepard_demo.serving.stream_protocol import STREAM_PATH
from gepard_demo.serving.voices import FORM_FIELDS, VoiceShelf
from gepard_demo.settings import StreamSettings
from gepard_demo.voice.library import MAX_NAME_CHARS, VoiceLibrary
from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

TEXT = "Say it in my voice."
FRAMES = 12
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)
CLIP = wav_bytes(voice_like(4.0, seed=7))
OTHER = wav_bytes(voice_like(5.0, f0=210.0, seed=3))


@pytest.fixture(scope="module")
def prefixer(tiny_engine, tiny_model_dir):
    return SpeakerPrefixer.for_engine(tiny_engine, tiny_model_dir / TINY_CODEC_FILE)


def _app(engine, codec, prefixer, folder, **library):
    from gepard_demo.serving.server import build_speech_app

    shelf = VoiceShelf(VoiceLibrary(folder, reserved=(DEFAULT_VOICE,), **library), prefixer)
    return build_speech_app(engine, codec, engine.default_sampling(), STREAM, prefixer=prefixer, voices=shelf)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("voices")


@pytest.fixture(scope="module")
def server(tiny_engine, tiny_codec, prefixer, folder):  # noqa: F811
    with serve_in_thread(_app(tiny_engine, tiny_codec, prefixer, folder), "voice-routes") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client


def _upload(client, name="Alice", consent="rec-1", clip=CLIP, filename="me.wav", content_type="audio/wav", **fields):
    files = {"audio_sample": (filename, clip, content_type)} if clip is not None else None
    data = {k: v for k, v in {"name": name, "consent": consent, **fields}.items() if v is not None}
    return client.post(VOICES_PATH, data=data, files=files)


def _speak(client, **fields):
    r = client.post("/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "seed": 5,
                                              "response_format": "pcm", **fields})
    return r


def _files(folder):
    return sorted(p.name for p in folder.glob("*.safetensors"))


def test_the_routes_fields_and_shapes_are_the_wheels(server):
    wheel = voice_routes()
    ours = served_routes(server)
    assert set(wheel) <= ours, f"routes the wheel has and we lack: {set(wheel) - ours}"
    assert tuple(wheel[("POST", VOICES_PATH)]) == FORM_FIELDS
    r = _upload(server, name="Shape", consent="c-9", ref_text="  ", speaker_description="warm narrator")
    assert r.status_code == 200, r.text
    voice = r.json()["voice"]
    assert r.json()["success"] is True and set(voice) <= upload_result_keys()
    assert voice["name"] == "Shape" and voice["speaker_description"] == "warm narrator" and "ref_text" not in voice
    listing = server.get(VOICES_PATH).json()
    entry = next(v for v in listing["uploaded_voices"] if v["name"] == "Shape")
    assert voice_listing_keys() - {"ref_text"} <= set(entry)  # ref_text only when given, as there
    assert entry["embedding_source"] == "audio" and entry["consent"] == "c-9"
    assert listing["voices"] == sorted(listing["voices"]) and {"default", "shape"} <= set(listing["voices"])
    for text in ("'audio_sample' and 'speaker_embedding' are mutually exclusive",
                 "Either 'audio_sample' or 'speaker_embedding' must be provided", "deleted successfully"):
        assert text in api_server_source()
    assert "Uploaded voice limit reached" in serving_source()
    assert server.delete(f"{VOICES_PATH}/shape").json() == {"success": True, "message": "Voice 'shape' deleted successfully"}


def served_routes(client) -> set[tuple[str, str]]:
    """(method, path) of the running app's routes, read back through its OpenAPI document."""
    paths = client.get("/openapi.json").json()["paths"]
    return {(method.upper(), path) for path, ops in paths.items() for method in ops}


def test_a_saved_voice_speaks_as_its_clip_sent_as_ref_audio(server):
    assert _upload(server, name="Alice").status_code == 200
    saved = _speak(server, voice="ALICE")  # names are case-insensitive
    sent = _speak(server, ref_audio=base64.b64encode(CLIP).decode())
    assert saved.status_code == 200, saved.text
    assert saved.content == sent.content  # byte for byte, at the same seed
    assert saved.content != _speak(server).content  # and not the default voice
    assert server.get("/v1/models").json()["data"][0]["voices"] is True


def test_voices_survive_a_restart(server, tiny_engine, tiny_codec, prefixer, folder):  # noqa: F811
    assert _upload(server, name="Restart", clip=OTHER).status_code == 200
    before = _speak(server, voice="restart").content
    with serve_in_thread(_app(tiny_engine, tiny_codec, prefixer, folder), "voice-routes-2") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as again:
            assert "restart" in again.get(VOICES_PATH).json()["voices"]
            assert _speak(again, voice="Restart").content == before


@pytest.mark.parametrize("upload, param, words", [
    ({"clip": b"%PDF-1.4 not audio at all" * 40}, "audio_sample", "not readable audio"),
    ({"clip": wav_bytes(np.zeros(22050 * 4, np.float32))}, "audio_sample", "silent"),
    ({"clip": wav_bytes(voice_like(1.0))}, "audio_sample", "too short"),
    ({"clip": wav_bytes(voice_like(16.0))}, "audio_sample", "too long"),
    ({"clip": b"RIFF" + bytes(10 * 1024 * 1024)}, "audio_sample", "exceeds maximum limit of 10MB"),
    ({"content_type": "text/plain"}, "audio_sample", "Unsupported MIME type"),
    ({"clip": None}, "audio_sample", "Either 'audio_sample' or 'speaker_embedding' must be provided"),
    ({"speaker_embedding": "[0.1, 0.2]"}, "speaker_embedding", "mutually exclusive"),
    ({"name": "../etc/passwd"}, "name", "no path separators"),
    ({"name": "   "}, "name", "must be non-empty"),
    ({"name": "x" * (MAX_NAME_CHARS + 1)}, "name", "at most"),
    ({"name": "Default"}, "name", "reserved by a built-in speaker"),
    ({"consent": None}, "consent", "'consent' is required"),
    ({"name": None}, "name", "'name' is required"),
])
def test_a_bad_upload_is_400_naming_its_field_and_stores_nothing(server, folder, upload, param, words):
    before = _files(folder)
    r = _upload(server, **upload)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err
    assert _files(folder) == before


def test_an_unknown_voice_is_400_naming_voice_over_rest_and_the_socket(server):
    r = _speak(server, voice="nobody")
    assert r.status_code == 400 and r.json()["error"]["param"] == "voice"
    assert "Unknown voice 'nobody'" in r.json()["error"]["message"]
    port = server.base_url.port
    got = _talk(port, [{"type": "session.config", "voice": "nobody", "response_format": "pcm"}])
    assert got[0]["type"] == "error" and "voice: Unknown voice 'nobody'" in got[0]["message"]


def test_the_sockets_config_takes_a_saved_voice(server):
    assert _upload(server, name="Sock", clip=OTHER).status_code == 200
    port = server.base_url.port
    config = {"type": "session.config", "voice": "sock", "response_format": "pcm", "stream_audio": True,
              "max_new_tokens": FRAMES, "seed": 5}
    saved = _talk(port, [config, {"type": "input.text", "text": TEXT}, {"type": "input.done"}])
    config.pop("voice")
    plain = _talk(port, [config, {"type": "input.text", "text": TEXT}, {"type": "input.done"}])
    audio = [b"".join(m for m in got if isinstance(m, bytes)) for got in (saved, plain)]
    assert audio[0] and audio[0] != audio[1]


def _talk(port: int, messages: list) -> list:
    async def go():
        got = []
        async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}", max_size=None) as ws:
            for m in messages:
                await ws.send(json.dumps(m))
            try:
                while True:
                    raw = await asyncio.wait_for(ws.recv(), 120)
                    got.append(raw if isinstance(raw, bytes) else json.loads(raw))
                    if isinstance(got[-1], dict) and got[-1]["type"] in ("session.done", "error"):
                        break
            except websockets.ConnectionClosed:
                pass
        return got

    return asyncio.run(go())


def test_deleting_a_voice_leaves_a_request_that_uses_it_alone(server):
    assert _upload(server, name="Gone").status_code == 200
    want = _speak(server, voice="gone").content
    with server.stream("POST", "/v1/audio/speech", json={"input": TEXT, "max_new_tokens": FRAMES, "seed": 5,
                                                         "response_format": "pcm", "stream_format": "audio", "voice": "gone"}) as r:
        chunks = r.iter_bytes()
        first = next(chunks)  # the request holds the voice's prefix now
        assert server.delete(f"{VOICES_PATH}/Gone").status_code == 200
        got = first + b"".join(chunks)
    assert r.status_code == 200 and got == want
    assert server.delete(f"{VOICES_PATH}/gone").status_code == 404
    assert _speak(server, voice="gone").json()["error"]["param"] == "voice"


def test_two_uploads_of_one_name_at_once_end_as_one_voice(server, folder):
    results = []

    def up(clip):
        with httpx.Client(base_url=str(server.base_url), timeout=120) as c:
            results.append(_upload(c, name="Twin", clip=clip).status_code)

    threads = [threading.Thread(target=up, args=(clip,)) for clip in (CLIP, OTHER)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [200, 200]
    twins = [v for v in server.get(VOICES_PATH).json()["uploaded_voices"] if v["name"] == "Twin"]
    assert len(twins) == 1 and len([f for f in _files(folder) if f.startswith("Twin_")]) == 1


def test_the_cap_refuses_one_more_voice(tiny_engine, tiny_codec, prefixer, tmp_path):  # noqa: F811
    with serve_in_thread(_app(tiny_engine, tiny_codec, prefixer, tmp_path, max_voices=1), "voice-cap") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            assert _upload(client, name="One").status_code == 200
            r = _upload(client, name="Two")
            assert r.status_code == 400 and "Uploaded voice limit reached (1)" in r.json()["error"]["message"]
            assert _upload(client, name="one", clip=OTHER).status_code == 200  # overwrite: the same voice again
            assert _files(tmp_path) and len(_files(tmp_path)) == 1


def test_a_server_without_a_compressor_keeps_no_voices(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling(), STREAM)
    with serve_in_thread(app, "voice-none") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            assert client.get(VOICES_PATH).json() == {"voices": ["default"], "uploaded_voices": []}
            r = _upload(client)
            assert r.status_code == 400 and "does not keep voices" in r.json()["error"]["message"]
            assert client.get("/v1/models").json()["data"][0]["voices"] is False
            assert _speak(client, voice="alice").json()["error"]["param"] == "voice"


def test_a_client_checks_a_voice_is_listed_before_it_asks_for_it(server):
    from gepard_demo.serving.client import SpeechClient, SpeechServerError

    assert _upload(server, name="Client").status_code == 200
    client = SpeechClient(str(server.base_url))
    try:
        client.check_voice("CLIENT")
        got = np.concatenate(list(client.stream(TEXT, seed=5, max_new_tokens=FRAMES, voice="client")))
        assert got.astype("<i2").tobytes() == _speak(server, voice="client").content
        with pytest.raises(SpeechServerError, match="does not list 'stranger'") as refused:
            client.check_voice("stranger")
        assert refused.value.kind == "refused"
    finally:
        client.close()


def test_eval_in_a_servers_saved_voice_and_refused_for_one_it_does_not_list(server, folder, tmp_path):
    from eval.runs.run import RunConfig, run
    from eval_fixtures import rows_of

    from eval.engines.base import EngineError
    from gepard_demo.settings import SamplingSettings

    assert _upload(server, name="Evaluated").status_code == 200
    url = str(server.base_url)
    cfg = RunConfig(engine="server", server_urls=(url,), set="smoke", limit=2, voices=("evaluated",),
                    voices_dir=str(folder), sampling=SamplingSettings(max_frames=FRAMES))
    run(cfg, tmp_path / "served", log=lambda m: None)
    rows = rows_of(tmp_path / "served")
    assert len(rows) == 2 and all(r["voice"] == "evaluated" and r["speaker_sim"] is not None for r in rows)
    with pytest.raises(EngineError, match="does not list 'stranger'"):
        run(RunConfig(**{**cfg.__dict__, "voices": ("stranger",)}), tmp_path / "refused", log=lambda m: None)
    assert not (tmp_path / "refused" / "rows.jsonl").exists()
