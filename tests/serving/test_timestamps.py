"""`word_timestamps` on our speech server, as vLLM-Omni's protocol defines it (facts §16; the
0.30.0 wheel the tests load: its request model, its serving layer's rules, its word cut), with
real speech: the server's session runs the tiny engine through a codec whose audio is a Piper
recording (alignment_fixtures.PiperCodec), so the words are there to be timed and their edges
are known from where the silences were put."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from tests.support import vllm_omni_reference as vllm
from tests.support.alignment_fixtures import RATE, PiperCodec, aligner, spoken  # noqa: F401  (aligner: fixture)
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)

from gepard_demo.alignment.aligner import NO_SPEECH
from gepard_demo.alignment.result import AlignedWord, Alignment, timestamp_headers
from gepard_demo.alignment.settings import DEFAULT_WEIGHTS
from gepard_demo.serving.client import ServedFeatures, SpeechServerError
from gepard_demo.serving.protocol import iter_sse_events
from gepard_demo.serving.timestamps import EVENT, align_segments
from gepard_demo.settings import StreamSettings

PIECES = ["The café is open.", "Please call Smith before nine on Monday."]
SPEECH = spoken(PIECES, [0.5])
CODEC = PiperCodec(SPEECH.audio)
STREAM = StreamSettings(first_chunk_frames=8, chunk_frames=16)  # no fade, no silence: the audio is Piper's, exactly
EDGE_MS = 100


def _app(engine, codec, aligner=None):
    from gepard_demo.serving.server import build_speech_app

    sampling = engine.default_sampling().replace(stop_threshold=0.99, max_frames=CODEC.frames)  # runs to the budget
    from gepard_demo.host_settings import BatchingSettings

    return build_speech_app(engine, codec, sampling, STREAM, aligner=aligner,
                            batching=BatchingSettings(codec_batching=False))  # the Piper codec decodes alone


@pytest.fixture(scope="module")
def piper_server(tiny_engine, aligner):  # noqa: F811
    with serve_in_thread(_app(tiny_engine, CODEC, aligner), "speech-server-words") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client


@pytest.fixture(scope="module")
def plain_server(tiny_engine, tiny_codec):  # noqa: F811
    with serve_in_thread(_app(tiny_engine, tiny_codec), "speech-server-no-words") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client


def _speak(client, **fields):
    return client.post("/v1/audio/speech", json={"input": SPEECH.text, "seed": 3, "word_timestamps": True, **fields})


def test_a_whole_response_carries_vllm_omnis_header_with_the_words_where_they_are_spoken(piper_server):
    r = _speak(piper_server)
    assert r.status_code == 200, r.text
    raw = r.headers["X-Word-Timestamps"]
    assert raw.isascii() and "caf\\u00e9" in raw  # json.dumps' ASCII escaping, as vLLM-Omni writes it
    words = json.loads(raw)
    assert [w["word"] for w in words] == vllm.aligner_words()(SPEECH.text)  # vLLM-Omni's own cut of the text
    assert all(set(w) == {"word", "start_ms", "end_ms"} and isinstance(w["start_ms"], int) for w in words)
    assert all(a["end_ms"] <= b["start_ms"] and a["start_ms"] <= a["end_ms"] for a, b in zip(words, words[1:]))
    # Each sentence's first start and last end sit where its samples were put (within 100 ms).
    first, k = [], 0
    for (start, end), piece in zip(SPEECH.edges, SPEECH.pieces):
        n = len(piece.split())
        assert abs(words[k]["start_ms"] - start * 1000) <= EDGE_MS, (words[k], start)
        assert abs(words[k + n - 1]["end_ms"] - end * 1000) <= EDGE_MS, (words[k + n - 1], end)
        k += n
    confidence = json.loads(r.headers["X-Gepard-Word-Confidence"])
    assert len(confidence) == len(words) and all(c is None or 0 <= c <= 1 for c in confidence)


def test_sse_sends_the_same_words_after_the_last_audio_and_before_done(piper_server):
    whole = json.loads(_speak(piper_server).headers["X-Word-Timestamps"])
    r = _speak(piper_server, stream=True, response_format="pcm")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    kinds = [e["type"] for e in iter_sse_events(r.text.splitlines())]
    assert kinds[-2:] == [EVENT, "speech.audio.done"] and set(kinds[:-2]) == {"speech.audio.delta"}
    event = list(iter_sse_events(r.text.splitlines()))[-2]
    assert event["timestamps"] == whole  # the same audio (a fixed recording), the same words


def test_the_websocket_sends_pcm_chunks_then_the_same_words_in_a_closing_chunk(piper_server):
    """The speech WebSocket with word_timestamps: the unit's PCM as audio.chunk frames (no words),
    then an empty closing chunk with the words, the same as the whole response's header."""
    import asyncio
    import base64

    import websockets

    whole = json.loads(_speak(piper_server).headers["X-Word-Timestamps"])
    url = str(piper_server.base_url).replace("http://", "ws://") + "/v1/audio/speech/stream"

    async def talk(text):
        got = []
        async with websockets.connect(url, max_size=None) as ws:
            for m in ({"type": "session.config", "response_format": "pcm", "stream_audio": True,
                       "word_timestamps": True, "seed": 3}, {"type": "input.text", "text": text},
                      {"type": "input.done"}):
                await ws.send(json.dumps(m))
            while (m := json.loads(await asyncio.wait_for(ws.recv(), 120)))["type"] != "session.done":
                got.append(m)
        return got

    # A break that starts the unit: 1 s of zeros first, the same words 1000 ms later.
    led = [m for m in asyncio.run(talk('<break time="1s"/> ' + SPEECH.text)) if m["type"] == "audio.chunk"]
    assert b"".join(base64.b64decode(c["audio_b64"]) for c in led)[:44100] == bytes(44100)
    assert led[-1]["timestamps"] == [{**w, "start_ms": w["start_ms"] + 1000, "end_ms": w["end_ms"] + 1000} for w in whole]
    got = asyncio.run(talk(SPEECH.text))
    assert got[0]["type"] == "audio.start" and got[0]["word_timestamps"] is True and got[-1]["type"] == "audio.done"
    chunks = [m for m in got if m["type"] == "audio.chunk"]
    *audio, closing = chunks
    assert [c["chunk_id"] for c in chunks] == list(range(len(chunks)))
    assert all(c["timestamps"] is None and c["audio_b64"] for c in audio)
    assert all(a["chunk_end_ms"] == b["chunk_start_ms"] for a, b in zip(audio, audio[1:]))
    pcm = b"".join(base64.b64decode(c["audio_b64"]) for c in audio)
    assert len(pcm) == got[-1]["total_bytes"] and closing["audio_b64"] == ""
    assert closing["chunk_end_ms"] == round(len(pcm) / 2 / RATE * 1000)
    assert closing["timestamps"] == whole  # the same recording, the same words where they are spoken


def test_a_raw_stream_refuses_the_field_by_name(piper_server):
    r = _speak(piper_server, stream_format="audio", response_format="pcm")
    assert r.status_code == 400 and r.json()["error"]["param"] == "word_timestamps"
    assert "raw audio stream" in r.json()["error"]["message"]


def test_no_speech_gives_an_empty_list_and_says_why(plain_server, tiny_engine, aligner):  # noqa: F811
    """The tiny model's noise: Silero finds no speech, so no Whisper run and no words."""
    with serve_in_thread(_app(tiny_engine, plain_server_codec(), aligner), "speech-server-noise") as port:
        r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", timeout=120,
                       json={"input": "Nothing but noise here.", "word_timestamps": True, "max_new_tokens": 40})
    assert r.status_code == 200
    assert r.headers["X-Word-Timestamps"] == "[]"
    assert r.headers["X-Gepard-Word-Timestamps-Note"] == NO_SPEECH


def plain_server_codec():
    return PiperCodec(np.random.default_rng(2).normal(0, 0.2, 2 * RATE).astype(np.float32))


def test_models_lists_the_field_only_with_an_aligner(piper_server, plain_server):
    ours = piper_server.get("/v1/models").json()["data"][0]
    assert ours["word_timestamps"] is True and ours["word_alignment"]["weights"] == DEFAULT_WEIGHTS == "tiny.en+base"
    assert plain_server.get("/v1/models").json()["data"][0]["word_timestamps"] is False


def test_a_server_without_an_aligner_refuses_it_as_vllm_omni_without_forced_aligner(plain_server):
    r = _speak(plain_server)
    assert r.status_code == 400 and r.json()["error"]["param"] == "word_timestamps"
    assert vllm.decide({"input": SPEECH.text, "word_timestamps": True}, "tiny") == (False, None)


def test_a_client_refuses_before_the_first_request_to_a_server_that_does_not_list_it(plain_server):
    entry = plain_server.get("/v1/models").json()["data"][0]
    with pytest.raises(SpeechServerError, match="^word_timestamps: .*does not list it"):
        ServedFeatures.of(entry).check_word_timestamps(str(plain_server.base_url))
    ServedFeatures.of({"word_timestamps": True}).check_word_timestamps("http://x")  # listed: no refusal


# (body, ours when it differs from vLLM-Omni with --forced-aligner, and why)
WT = {"input": "Hello there.", "word_timestamps": True}
CORPUS = [
    (WT, None),
    ({**WT, "response_format": "pcm"}, None),
    ({**WT, "response_format": "flac"}, None),
    ({**WT, "word_timestamps": "true"}, None),
    ({**WT, "word_timestamps": "maybe"}, None),
    ({**WT, "stream_format": "audio", "response_format": "pcm"}, None),
    ({**WT, "stream": True, "stream_format": "audio", "response_format": "wav"}, None),
    ({**WT, "stream": True, "response_format": "pcm"}, ("sse", "SSE carries them in an event after the audio")),
    ({**WT, "stream_format": "sse", "response_format": "wav"}, ("sse", "SSE carries them in an event after the audio")),
]


@pytest.mark.parametrize("body, diff", CORPUS, ids=[json.dumps(c[0])[:60] for c in CORPUS])
def test_the_field_is_decided_as_vllm_omni_with_an_aligner_decides_it(body, diff):
    from gepard_demo.serving.cloning import request_rules as cloning_rules
    from gepard_demo.serving.protocol import RequestError, parse_speech_request
    from gepard_demo.serving.timestamps import request_rules

    try:
        got = (True, parse_speech_request(body, "tiny", request_rules(cloning_rules(False), True)).mode)
    except RequestError as exc:
        assert exc.param in ("word_timestamps", "response_format", None), exc
        got = (False, None)
    want = vllm.decide(body, "tiny", forced_aligner=True)
    assert got == (want if diff is None else (True, diff[0]))


def test_the_4_kb_rule_as_vllm_omni_writes_it():
    """A list of exactly 4096 bytes is sent; one byte more and it is omitted, with its size."""
    src = vllm.serving_source()
    assert 'headers["X-Word-Timestamps-Omitted"] = f"oversize; bytes={len(ts_json)}; limit=4096"' in src
    assert "if len(ts_json) <= 4096:" in src and "ts_json = json.dumps(collect[\"word_timestamps\"])" in src
    one = '{"word": "w", "start_ms": 0, "end_ms": 0}'  # one word at 0 ms; n of them: n * (len + 2) bytes
    n = 4096 // (len(one) + 2)  # with the brackets and n - 1 ", " between them
    words = ["w"] * (n - 1) + ["w" * (1 + 4096 - n * (len(one) + 2))]  # the last word longer: exactly 4096

    def alignment(ws):
        return Alignment(tuple(AlignedWord(w, w, 0.0, 0.0, 1.0, 1.0, "aligned") for w in ws))

    fits = timestamp_headers(alignment(words))
    assert len(fits["X-Word-Timestamps"]) == 4096
    over = timestamp_headers(alignment(words[:-1] + [words[-1] + "w"]))
    assert "X-Word-Timestamps" not in over and "X-Gepard-Word-Confidence" not in over
    assert over["X-Word-Timestamps-Omitted"] == "oversize; bytes=4097; limit=4096"


def test_a_long_texts_segments_are_aligned_each_on_its_own_audio_and_placed(aligner):  # noqa: F811
    """Two segments of 1024-sample frames: the second's words come out shifted by the first's
    frames, where its samples are."""
    one, two = spoken(["The quick brown fox."], []), spoken(["Nobody saw where it went."], [])
    frames = [-(-len(one.audio) // 1024), -(-len(two.audio) // 1024)]
    audio = np.zeros(sum(frames) * 1024, np.float32)
    audio[: len(one.audio)] = one.audio
    audio[frames[0] * 1024: frames[0] * 1024 + len(two.audio)] = two.audio
    got = align_segments(aligner, audio, RATE, ["The quick brown fox.", "Nobody saw where it went."], frames, 1024)
    offset = frames[0] * 1024 / RATE  # 2.6 s: a misplaced segment misses by seconds, a loose edge by < 0.15 s
    assert abs(got.words[4].start - (offset + two.edges[0][0])) <= 0.15
    assert abs(got.words[-1].end - (offset + two.edges[0][1])) <= 0.15
    assert abs(got.words[3].end - one.edges[0][1]) <= 0.15


@pytest.mark.parametrize("text", ["Hello, Dr. Smith! It's 9:30.", "The café, 日本語 and mixed中文text.", "— 😀 !!! ...",
                                  "don't  stop\tnow", "$42.50, 3.7% up; 1,250 tickets", "«Quoted» ‘words’ (here)"])
def test_our_word_cut_is_vllm_omnis(text):
    from gepard_demo.alignment.words import text_words

    assert [w.word for w in text_words(text)] == vllm.aligner_words()(text)


def test_the_websocket_refuses_word_timestamps_without_a_pcm_stream_naming_both_fields(piper_server):
    """The wheel's rule (its serving_speech_stream.py, word for word): the words ride the PCM
    audio.chunk frames, so a config without stream_audio, or not pcm, is refused; DEPLOY says so."""
    import ast
    import asyncio
    from pathlib import Path

    import websockets

    from gepard_demo.serving.stream_protocol import TIMESTAMPS_NEED_PCM_STREAM

    wheel = ast.parse((vllm.wheel_root() / "entrypoints/openai/serving_speech_stream.py").read_text())
    texts = {n.value for n in ast.walk(wheel) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert TIMESTAMPS_NEED_PCM_STREAM in texts  # the wheel's own words
    url = str(piper_server.base_url).replace("http://", "ws://") + "/v1/audio/speech/stream"

    async def error_for(config):
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"type": "session.config", "word_timestamps": True, **config}))
            return json.loads(await asyncio.wait_for(ws.recv(), 60))

    for config in ({}, {"response_format": "pcm"}, {"stream_audio": False, "response_format": "wav"}):
        got = asyncio.run(error_for(config))
        assert got == {"type": "error", "message": TIMESTAMPS_NEED_PCM_STREAM}, (config, got)
        assert "stream_audio=true" in got["message"] and "response_format='pcm'" in got["message"]
    deploy = (Path(__file__).resolve().parents[2] / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    assert "`word_timestamps: true` needs `stream_audio: true`" in deploy
