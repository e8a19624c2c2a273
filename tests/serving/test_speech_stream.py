"""The speech WebSocket (`/v1/audio/speech/stream`, vLLM-Omni 0.30's protocol) on our server: a
real uvicorn server and a real WebSocket client. Each unit's audio equals the REST answer for its
text and seed; a closed socket frees the rows; bad messages get the wheel's `error` and the
connection goes on."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import numpy as np
import pytest
import websockets
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)
from tests.support.hold_fixtures import endless, wait_until, within  # noqa: F401
from tests.support.vllm_omni_reference import stream_config_model

from gepard_demo.serving.stream_protocol import STREAM_PATH, StreamConfig, StreamError, parse_config
from gepard_demo.settings import StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.streaming.segments import segment_seed

STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=7, fade_ms=5.0, silence_ms=20.0)
FRAMES = 24


@pytest.fixture(scope="module")
def served(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    # A random-weight stop head far from firing: every unit runs its whole frame budget.
    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling().replace(stop_threshold=0.99),
                           STREAM, batching=BatchingSettings(max_batch=4, admission="cap"))
    with serve_in_thread(app, "speech-stream") as port:
        yield port, app.state.scheduler


def _talk(port: int, messages: list, until: str = "session.done", pause_s: float = 0.0) -> list:
    """Send the messages (dicts as JSON, str as they are, bytes as a binary frame), then read until a message of
    type `until` (or the server closes): every message received, binary frames as bytes."""

    async def go():
        got = []
        async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}", max_size=None) as ws:
            for m in messages:
                await ws.send(json.dumps(m) if isinstance(m, dict) else m)  # str: sent as it is
                if pause_s:
                    await asyncio.sleep(pause_s)
            try:
                while True:
                    raw = await asyncio.wait_for(ws.recv(), 120)
                    msg = raw if isinstance(raw, bytes) else json.loads(raw)
                    got.append(msg)
                    if isinstance(msg, dict) and msg.get("type") == until:
                        break
            except websockets.ConnectionClosed:
                pass
        return got

    return asyncio.run(go())


def _config(**fields) -> dict:
    return {"type": "session.config", "response_format": "pcm", "stream_audio": True, "split_granularity": "sentence",
            "max_new_tokens": FRAMES, "seed": 5, **fields}


def _units(messages: list) -> list[tuple[dict, bytes, dict]]:
    """(audio.start, the unit's audio bytes, audio.done) per unit, in the order sent."""
    out, start, audio = [], None, b""
    for m in messages:
        if isinstance(m, bytes):
            audio += m
        elif m["type"] == "audio.start":
            start, audio = m, b""
        elif m["type"] == "audio.done":
            out.append((start, audio, m))
    return out


def _rest(port: int, text: str, seed: int) -> bytes:
    r = httpx.post(f"http://127.0.0.1:{port}/v1/audio/speech", timeout=120,
                   json={"input": text, "response_format": "pcm", "max_new_tokens": FRAMES, "seed": seed})
    assert r.status_code == 200, r.text
    return r.content


def test_each_sentence_is_the_rest_answer_for_its_text_and_segment_seed(served):
    port, _ = served
    got = _talk(port, [_config(), {"type": "input.text", "text": "Hello there. How"},
                       {"type": "input.text", "text": " are you? Fi"}, {"type": "input.text", "text": "ne"},
                       {"type": "input.done"}])
    units = _units(got)
    assert [u[0]["sentence_text"] for u in units] == ["Hello there.", "How are you?", "Fine"]
    assert got[-1] == {"type": "session.done", "utterance_index": 0, "total_sentences": 3}
    for k, (start, audio, done) in enumerate(units):
        assert (start["utterance_index"], start["sentence_index"], start["format"]) == (0, k, "pcm")
        assert start["sample_rate"] == 22050  # Gepard's rate; the wheel announces 24000 (DEPLOY lists it)
        assert done == {"type": "audio.done", "utterance_index": 0, "sentence_index": k, "total_bytes": len(audio),
                        "error": False}
        # Unit k takes segment k's seed: alone through REST it is the same audio, up to the one
        # LSB the pooled codec call may move a sample by (docs/DESIGN.md, "What is exact").
        assert _lsb_apart(audio, _rest(port, start["sentence_text"], segment_seed(5, k))) <= 1


def _lsb_apart(a: bytes, b: bytes) -> int:
    """The largest difference between two int16 PCM streams of the same length."""
    x, y = np.frombuffer(a, "<i2").astype(np.int32), np.frombuffer(b, "<i2").astype(np.int32)
    assert len(x) == len(y) and len(x) > 0
    return int(np.abs(x - y).max())


@pytest.mark.slow
def test_the_connection_serves_utterance_after_utterance_and_a_whole_file_each(served):
    port, _ = served
    got = _talk(port, [_config(response_format="wav", stream_audio=False, split_granularity="none"),
                       {"type": "input.text", "text": "One. Two."}, {"type": "input.done"},
                       {"type": "input.text", "text": "Three."}, {"type": "input.done"}], until="never")
    done = [m for m in got if isinstance(m, dict) and m["type"] == "session.done"]
    assert done == [{"type": "session.done", "utterance_index": 0, "total_sentences": 1},
                    {"type": "session.done", "utterance_index": 1, "total_sentences": 1}]
    files = [m for m in got if isinstance(m, bytes)]
    assert len(files) == 2 and all(f[:4] == b"RIFF" and f[8:12] == b"WAVE" for f in files)


@pytest.mark.parametrize("message, error", [
    ("not json", "Invalid JSON message"),
    (json.dumps([1, 2]), "WebSocket messages must be JSON objects"),
    (json.dumps({"type": "input.text", "text": "hi"}), "Expected session.config, got: input.text"),
])
def test_a_bad_first_message_is_refused_and_the_connection_ends(served, message, error):
    port, _ = served

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}") as ws:
            await ws.send(message)
            first = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(websockets.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 30)
            return first

    assert asyncio.run(go()) == {"type": "error", "message": error}


def test_bad_messages_mid_session_are_refused_and_nothing_else_is_lost(served):
    port, _ = served
    got = _talk(port, [
        _config(), {"type": "input.text", "text": "Kept one. Kept"},
        "{broken", b"\x00\x01", {"type": "input.bogus"}, {"type": "input.text", "text": 7},
        {"type": "input.text", "text": "x" * (128 * 1024 + 1)},
        # An empty piece leaves the utterance open: the config after it is refused, "Kept" stays buffered.
        {"type": "input.text", "text": ""}, {"type": "session.config", "seed": 1},
        {"type": "input.text", "text": " two."}, {"type": "input.done"}])
    errors = [m["message"] for m in got if isinstance(m, dict) and m["type"] == "error"]
    assert errors == ["Invalid JSON message", "binary frames are not accepted: send JSON text messages",
                      "Unknown message type: input.bogus", "input.text requires a string value",
                      "input.text message too large",
                      "session.config cannot be applied while an utterance is in progress; send input.done first"]
    assert [u[0]["sentence_text"] for u in _units(got)] == ["Kept one.", "Kept two."]
    assert all(not u[2]["error"] and u[1] for u in _units(got))


def test_a_bad_config_names_its_field_and_the_previous_config_stays(served):
    port, _ = served
    got = _talk(port, [_config(), {"type": "session.config", "repetition_window": -1},
                       {"type": "session.config", "response_format": "opus"},
                       {"type": "input.text", "text": "Still served."}, {"type": "input.done"}])
    errors = [m["message"] for m in got if isinstance(m, dict) and m["type"] == "error"]
    assert len(errors) == 2 and "repetition_window" in errors[0] and "opus" in errors[1]
    assert [u[0]["sentence_text"] for u in _units(got)] == ["Still served."]


def test_a_break_at_a_units_edge_is_its_exact_silence_even_cut_across_messages(served):
    """Sentence units: a break after a sentence's end starts the next unit (its leading silence),
    one at the utterance's end is a unit of silence alone; with `none` a break that ends the text
    is the unit's trailing silence. Each exactly round(s x 22050) zero samples beside the unit's
    own audio (its REST answer, as above); the tags come cut across input.text messages."""
    port, _ = served
    got = _talk(port, [_config(), {"type": "input.text", "text": "Hello there. <bre"},
                       {"type": "input.text", "text": 'ak time="500ms"/> How are you? <break t'},
                       {"type": "input.text", "text": 'ime="1s"/>'}, {"type": "input.done"}])
    units = _units(got)
    assert [u[0]["sentence_text"] for u in units] == ["Hello there.", '<break time="500ms"/> How are you?',
                                                       '<break time="1s"/>']
    assert got[-1]["total_sentences"] == 3 and not any(u[2]["error"] for u in units)
    lead = units[1][1]
    assert lead[:22050] == bytes(22050) and _lsb_apart(lead[22050:], _rest(port, "How are you?", segment_seed(5, 1))) <= 1
    assert units[2][1] == bytes(44100)  # 1 s: 22050 samples, 2 bytes each
    whole = _units(_talk(port, [_config(split_granularity="none"), {"type": "input.text", "text": "Hi there <break "},
                                {"type": "input.text", "text": 'time="200ms"/>'}, {"type": "input.done"}]))
    assert len(whole) == 1 and whole[0][1][-8820:] == bytes(8820)  # 200 ms: 4410 samples after the words
    assert _lsb_apart(whole[0][1][:-8820], _rest(port, "Hi there", segment_seed(5, 0))) <= 1


def test_the_pages_text_written_to_the_server_keeps_its_break_exact(served):
    """The page's "as written" mode in front of this server (served_written.py): the words, the
    tag cut in two among them, go over the WebSocket; the page plays the break's exact zeros
    between the sentences."""
    from gepard_demo.serving.client import SpeechClient
    from gepard_demo.serving.served_written import ServedWrittenSession
    from gepard_demo.settings import SamplingSettings
    from gepard_demo.streaming.seams import SessionRequest

    port, _ = served
    client = SpeechClient(f"http://127.0.0.1:{port}")
    request = SessionRequest('Hello there. <break time="500ms"/> How are you?', SamplingSettings(seed=5, max_frames=FRAMES),
                             STREAM, words_per_s=100.0)
    session = ServedWrittenSession(client, request)
    audio = (np.concatenate([c.samples for c in session]) * 32768.0).round().astype("<i2").tobytes()
    client.close()
    first = _rest(port, "Hello there.", segment_seed(session.sampling.seed, 0))
    assert session.segments == ["Hello there.", '<break time="500ms"/> How are you?'] and session.stats.complete
    assert _lsb_apart(audio[:len(first)], first) <= 1 and audio[len(first):len(first) + 22050] == bytes(22050)
    assert _lsb_apart(audio[len(first) + 22050:], _rest(port, "How are you?", segment_seed(session.sampling.seed, 1))) <= 1


def test_a_bad_break_at_a_units_edge_is_refused_naming_input(served):
    port, _ = served
    got = _talk(port, [_config(), {"type": "input.text", "text": 'One. <break time="9s"/> Two. <break time="x"/> Three.'},
                       {"type": "input.text", "text": " " + '<break time="5s"/> Four. ' * 7}, {"type": "input.done"}])
    errors = [m["message"] for m in got if isinstance(m, dict) and m["type"] == "error"]
    assert len(errors) == 3 and all("input: " in e for e in errors), errors
    assert "at most 5 s" in errors[0] and "not a break" in errors[1] and "add up to 35 s" in errors[2]
    assert [u[2]["error"] for u in _units(got)] == [False, True, True] + [False] * 6 + [True]  # the 7th 5 s: over 30
    cut_off = _talk(port, [_config(), {"type": "input.text", "text": 'Hello there. <break ti'}, {"type": "input.done"}])
    assert [u[2]["error"] for u in _units(cut_off)] == [False, True]  # the stream ended inside the tag: not read aloud
    assert [m["message"] for m in cut_off if isinstance(m, dict) and m["type"] == "error"][0].count("input: ") == 1


def test_word_timestamps_without_an_aligner_is_refused_as_the_wheel_words_it(served):
    port, _ = served
    got = _talk(port, [_config(word_timestamps=True)], until="error")
    assert got[-1]["message"].startswith("word_timestamps=true but the server was launched without --forced-aligner")


def test_a_closed_socket_frees_every_row_while_the_text_never_ends(served, endless):  # noqa: F811
    port, scheduler = served

    async def go():
        async with websockets.connect(f"ws://127.0.0.1:{port}{STREAM_PATH}") as ws:
            # Unit 0 takes the config's seed: it never ends; unit 1 waits its turn, made ahead.
            await ws.send(json.dumps(_config(seed=endless, max_new_tokens=None)))
            await ws.send(json.dumps({"type": "input.text", "text": "This one never ends. Nor is"}))
            await ws.send(json.dumps({"type": "input.text", "text": " this text ever done. And"}))
            while not isinstance(await asyncio.wait_for(ws.recv(), 60), bytes):
                pass  # audio is flowing
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: wait_until(lambda: scheduler.load()["running"] == 2, what="both units running"))

    asyncio.run(go())  # the socket closes here, mid-sentence, mid-text
    within(lambda: scheduler.load()["running"] == 0 and scheduler.load()["waiting"] == 0)


def test_session_config_matches_the_wheel_model():
    """What the wheel's StreamingSpeechSessionConfig accepts and refuses, ours does too (ours
    also refuses unknown fields, as our REST route does; our extension fields travel beside)."""
    Wheel = stream_config_model()
    cases = [{}, {"stream_audio": True, "response_format": "pcm"}, {"stream_audio": True},
             {"stream_audio": True, "response_format": "pcm", "speed": 2.0}, {"speed": 0.1}, {"max_new_tokens": 0},
             {"split_granularity": "word"}, {"split_granularity": "clause", "seed": 3}, {"speaker": "default"},
             {"response_format": "opus"}, {"seed": 2**63}, {"speaker_embedding": [0.0] * 8193}]
    for fields in cases:
        try:
            Wheel(**fields)
            theirs = True
        except ValueError:
            theirs = False
        try:
            parse_config({"type": "session.config", **fields})
            ours = True
        except StreamError:
            ours = False
        assert ours == theirs, fields
    config, ext = parse_config({"type": "session.config", "cfg_scale": 2.0, "force_stop_frames": "auto"})
    assert isinstance(config, StreamConfig) and ext == {"cfg_scale": 2.0, "force_stop_frames": "auto"}
    with pytest.raises(StreamError, match="temprature"):
        parse_config({"type": "session.config", "temprature": 0.5})


def test_units_are_made_ahead_while_the_first_is_sent(served):
    """Text that comes all at once: the later units do not wait for the first one's audio to be
    sent; they run beside it as rows of the running batch."""
    port, scheduler = served
    seen, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            seen.append(scheduler.load()["running"])
            time.sleep(0.002)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        got = _talk(port, [_config(max_new_tokens=40), {"type": "input.text", "text": "One. Two. Three. Four."},
                           {"type": "input.done"}])
    finally:
        stop.set()
        watcher.join()
    assert len(_units(got)) == 4 and max(seen) >= 2


def test_speak_reads_stdin_as_it_arrives_and_prints_each_units_wait(served, tmp_path):
    """`python -m gepard_demo speak`, a real second process fed through a pipe in pieces: each
    unit's line, and the WAV of every unit in order (each the REST answer for its text)."""
    import subprocess
    import sys

    import soundfile as sf

    port, _ = served
    out = tmp_path / "spoken.wav"
    proc = subprocess.Popen([sys.executable, "-m", "gepard_demo", "speak", "--server", f"http://127.0.0.1:{port}",
                             "--seed", "5", "--max-new-tokens", str(FRAMES), "-o", str(out)],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for piece in ("First one. Sec", "ond one", ". Last"):
        proc.stdin.write(piece)
        proc.stdin.flush()
        time.sleep(0.3)
    proc.stdin.close()
    assert proc.wait(120) == 0
    lines = [json.loads(line) for line in proc.stderr.read().splitlines() if line.startswith("{")]
    assert [u["text"] for u in lines] == ["First one.", "Second one.", "Last"]
    assert all(u["error"] is None and u["text_to_audio_ms"] is not None for u in lines)
    audio, rate = sf.read(out, dtype="int16")
    want = b"".join(_rest(port, u["text"], segment_seed(5, k)) for k, u in enumerate(lines))
    assert rate == 22050 and _lsb_apart(audio.tobytes(), want) <= 1
