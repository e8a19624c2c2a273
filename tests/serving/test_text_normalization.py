"""text_normalization where the text becomes a prompt (GepardEngine.prompt_ids / request), and on the
speech server: our "normalization" extension group, per request on REST and in the WebSocket's
session.config, the server's default from `serve --text-normalization`, listed in /v1/models, a
bad value a 400 naming it; a client refuses to send it to a server that does not list it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (fixture)

from gepard_demo.serving.stream_protocol import STREAM_PATH
from gepard_demo.settings import SamplingSettings, StreamSettings

FRAMES = 24
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)
WRITTEN, SPOKEN = "It costs $5.50 at 9 a.m.", "It costs five dollars fifty cents at nine a m."


def _app(engine, codec, **sampling):
    from gepard_demo.serving.server import build_speech_app

    # A random-weight stop head far from firing: every request runs its whole frame budget.
    return build_speech_app(engine, codec, engine.default_sampling().replace(stop_threshold=0.99, **sampling), STREAM)


@pytest.fixture(scope="module")
def server(tiny_engine, tiny_codec):  # noqa: F811
    with serve_in_thread(_app(tiny_engine, tiny_codec), "speech-server-normalization") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client, port


def _speak(client, text: str, **fields) -> bytes:
    r = client.post("/v1/audio/speech", json={"input": text, "max_new_tokens": FRAMES, "seed": 5,
                                              "response_format": "pcm", **fields})
    assert r.status_code == 200, r.text
    return r.content


def test_the_prompt_is_made_from_what_the_front_end_reads(tiny_engine):
    rules = SamplingSettings(text_normalization="rules")
    assert tiny_engine.prompt_ids(WRITTEN, rules) == tiny_engine.prompt_ids(SPOKEN)
    assert tiny_engine.prompt_ids(WRITTEN) != tiny_engine.prompt_ids(SPOKEN)  # off: as written
    lexicon = SamplingSettings(lexicon_entries="SQL = sequel", text_normalization="rules")
    assert tiny_engine.prompt_ids("SQL costs $5.", lexicon) == tiny_engine.prompt_ids("sequel costs five dollars.")


def test_a_requests_lexicon_entries_come_before_normalization(server):
    client, _ = server
    said = _speak(client, "SQL costs $5.", lexicon_entries="SQL = sequel; $5 = a fiver", text_normalization="rules")
    assert said == _speak(client, "sequel costs a fiver.")


def test_models_lists_the_normalization_group(server):
    client, _ = server
    entry = client.get("/v1/models").json()["data"][0]
    assert entry["normalization"] is True and "text_normalization" in entry["extension_fields"]


def test_a_request_field_normalizes_its_text(server):
    client, _ = server
    normalized = _speak(client, WRITTEN, text_normalization="rules")
    assert normalized == _speak(client, SPOKEN)
    assert normalized != _speak(client, WRITTEN)


@pytest.mark.parametrize("field, value, words", [
    ("text_normalization", "loud", "must be one of"), ("text_normalization", 3, "must be one of"),
    ("lexicon_entries", "SQL = my SQL", "loops"), ("lexicon_entries", ["SQL = sequel"], "must be a string"),
    ("lexicon_entries", '<lexicon xmlns="http://www.w3.org/2005/01/pronunciation-lexicon"><lexeme>'
                        '<grapheme>SQL</grapheme><phoneme>x</phoneme></lexeme></lexicon>', "not phonemes"),
])
def test_a_bad_value_is_a_400_naming_it(server, field, value, words):
    client, _ = server
    r = client.post("/v1/audio/speech", json={"input": WRITTEN, field: value})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == field and words in err["message"], err


def test_the_websockets_session_config_takes_them(server):
    client, port = server

    async def talk():
        audio = b""
        async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}", max_size=None) as ws:
            for m in ({"type": "session.config", "response_format": "pcm", "stream_audio": True, "seed": 5,
                       "max_new_tokens": FRAMES, "text_normalization": "rules", "lexicon_entries": "It = That"},
                      {"type": "input.text", "text": WRITTEN}, {"type": "input.done"}):
                await ws.send(json.dumps(m))
            while True:
                raw = await asyncio.wait_for(ws.recv(), 120)
                if isinstance(raw, bytes):
                    audio += raw
                elif json.loads(raw)["type"] in ("session.done", "error"):
                    return audio, json.loads(raw)

    audio, last = asyncio.run(talk())
    assert last["type"] == "session.done", last
    plain = _speak(client, SPOKEN.replace("It", "That"))
    assert len(audio) == len(plain)
    assert max(abs(a - b) for a, b in zip(memoryview(audio).cast("h"), memoryview(plain).cast("h"))) <= 1


def test_the_servers_default_comes_from_its_flag(tiny_engine, tiny_codec):  # noqa: F811
    with serve_in_thread(_app(tiny_engine, tiny_codec, text_normalization="rules"), "speech-server-tn-default") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            assert _speak(client, WRITTEN) == _speak(client, SPOKEN, text_normalization="off")


def test_a_client_refuses_it_for_a_server_that_does_not_list_it():
    from gepard_demo.serving.client import ServedFeatures, unserved_extension

    rules = SamplingSettings(text_normalization="rules")
    assert unserved_extension(rules, ServedFeatures(guidance=True, guardrails=True)) == \
        ("normalization", "text_normalization", "rules")
    assert unserved_extension(rules, ServedFeatures.of({"normalization": True})) is None
    assert unserved_extension(SamplingSettings(), ServedFeatures()) is None  # off: a plain vLLM-Omni request
