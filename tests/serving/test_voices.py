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
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)
from tests.support.sound import voice_like, wav_bytes
from tests.support.vllm_omni_reference import api_server_source, serving_source, upload_result_keys, voice_listing_keys, voice_routes

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
    from tests.support.eval_fixtures import rows_of

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


# -- issue 62: what clients really send, bodies over the bounds, look-alikes, a voice kept ---------


def test_an_upload_sent_as_octet_stream_takes_its_type_from_the_extension(server):
    r = _upload(server, name="Octet", filename="take.flac", content_type="application/octet-stream")
    assert r.status_code == 200, r.text
    assert r.json()["voice"]["mime_type"] == "audio/flac"
    r = _upload(server, name="Octet2", filename="noext", content_type="application/octet-stream")
    assert r.status_code == 200 and r.json()["voice"]["mime_type"] == "audio/wav"


def test_ref_audio_wins_over_a_saved_voice_when_both_are_sent(server):
    """The wheel's rule (and DEPLOY's): a request with `voice` and `ref_audio` speaks in the clip."""
    assert _upload(server, name="Both").status_code == 200
    other = base64.b64encode(OTHER).decode()
    both = _speak(server, voice="both", ref_audio=other)
    assert both.status_code == 200, both.text
    assert both.content == _speak(server, ref_audio=other).content
    assert both.content != _speak(server, voice="both").content


def test_default_is_one_name_however_it_is_spaced_or_cased(server):
    plain = _speak(server).content
    for name in (" default", "DEFAULT ", "ｄｅｆａｕｌｔ"):
        r = _speak(server, voice=name)
        assert r.status_code == 200 and r.content == plain, (name, r.text[:200])


@pytest.mark.parametrize("name", ["ＤＥＦＡＵＬＴ", "de\u200bfault", "a\u0085b", "x\u2028y", "x\u202ey"])
def test_look_alike_names_are_refused(server, folder, name):
    before = _files(folder)
    r = _upload(server, name=name)
    assert r.status_code == 400 and r.json()["error"]["param"] == "name", r.text
    assert _files(folder) == before


@pytest.mark.parametrize("field, limit", [("consent", "MAX_CONSENT_CHARS"), ("ref_text", "MAX_TEXT_CHARS"),
                                          ("speaker_description", "MAX_TEXT_CHARS")])
def test_an_overlong_text_is_400_naming_it_with_no_path(server, folder, field, limit):
    from gepard_demo.voice import library

    before = _files(folder)
    r = _upload(server, name="Long", **{field: "y" * (getattr(library, limit) + 100)})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == field and str(folder) not in err["message"] and "/" not in err["message"]
    assert _files(folder) == before


def test_a_disk_fault_is_a_500_without_the_servers_paths(server, folder, monkeypatch):
    from gepard_demo.voice import library

    def full(tensors, path, metadata=None):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(library, "save_file", full)
    r = _upload(server, name="Full")
    assert r.status_code == 500 and "No space left" in r.json()["error"]["message"]
    assert str(folder) not in r.text and ".partial" not in r.text


def test_two_files_or_a_name_sent_as_a_file_are_400_naming_the_field(server, folder):
    before = _files(folder)
    two = server.post(VOICES_PATH, data={"name": "Two", "consent": "c"},
                      files=[("audio_sample", ("a.wav", CLIP, "audio/wav")), ("audio_sample", ("b.wav", OTHER, "audio/wav"))])
    assert two.status_code == 400 and two.json()["error"]["param"] == "audio_sample", two.text
    as_file = server.post(VOICES_PATH, data={"consent": "c"},
                          files=[("audio_sample", ("a.wav", CLIP, "audio/wav")), ("name", ("n.txt", b"Nm", "text/plain"))])
    assert as_file.status_code == 400 and as_file.json()["error"]["param"] == "name", as_file.text
    twice = server.post(VOICES_PATH, data={"name": ["A", "B"], "consent": "c"},
                        files={"audio_sample": ("a.wav", CLIP, "audio/wav")})
    assert twice.status_code == 400 and twice.json()["error"]["param"] == "name", twice.text
    assert _files(folder) == before


def test_a_body_past_an_uploads_bound_is_413_before_it_is_read(server):
    """Declared past the upload's bound (10 MB + its form) though under the app's 16 MiB: 413 from
    the headers alone, the body never sent; sent chunked past it: 413 too, not a 400."""
    import socket

    from gepard_demo.serving.voices import UPLOAD_BODY_BYTES

    port = server.base_url.port
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall((f"POST {VOICES_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\n"
                      f"Content-Length: {UPLOAD_BODY_BYTES + 1}\r\n\r\n").encode())
        head = sock.recv(4096).decode(errors="replace")  # answered with no byte of the body sent
    assert head.startswith("HTTP/1.1 413"), head

    def chunks():
        yield b"--b\r\nContent-Disposition: form-data; name=\"audio_sample\"; filename=\"a.wav\"\r\n\r\n"
        for _ in range(12):
            yield bytes(1024 * 1024)

    r = server.post(VOICES_PATH, content=chunks(), headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert r.status_code == 413 and r.json()["error"]["code"] == 413, r.text


def test_a_socket_session_keeps_the_voice_it_read_when_the_voice_is_deleted(server):
    """A deleted voice leaves a WebSocket session that read it alone, as it leaves a REST request:
    the session's later sentences still speak in it (before: "Unknown voice" on the next one)."""
    assert _upload(server, name="Kept", clip=OTHER).status_code == 200
    port = server.base_url.port
    config = {"type": "session.config", "voice": "kept", "response_format": "pcm", "stream_audio": True,
              "max_new_tokens": FRAMES, "seed": 5, "split_granularity": "sentence"}

    async def go():
        got = []
        async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}", max_size=None) as ws:
            await ws.send(json.dumps(config))
            await ws.send(json.dumps({"type": "input.text", "text": "The first sentence is here. The"}))
            while not any(isinstance(m, bytes) for m in got):  # the first sentence is speaking
                raw = await asyncio.wait_for(ws.recv(), 120)
                got.append(raw if isinstance(raw, bytes) else json.loads(raw))
            deleted = await asyncio.to_thread(server.delete, f"{VOICES_PATH}/Kept")
            assert deleted.status_code == 200
            await ws.send(json.dumps({"type": "input.text", "text": " second one follows."}))
            await ws.send(json.dumps({"type": "input.done"}))
            while True:
                raw = await asyncio.wait_for(ws.recv(), 120)
                got.append(raw if isinstance(raw, bytes) else json.loads(raw))
                if isinstance(got[-1], dict) and got[-1]["type"] in ("session.done", "error"):
                    break
        return got

    got = asyncio.run(go())
    events = [m for m in got if isinstance(m, dict)]
    assert not [e for e in events if e["type"] == "error" or e.get("error")], events
    assert events[-1]["type"] == "session.done"
    assert len([e for e in events if e["type"] == "audio.start"]) == 2, [e["type"] for e in events]
