"""The demo server through its public surfaces: gradio_client for the event, HTTP for the PCM.

A real Gradio server on 127.0.0.1 (free port) serving the real tiny engine and codec.
"""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import (  # noqa: F401  (fixtures)
    DEFAULTS, ORDER, Listener, args, client, flood_listeners, generate_with_stream, live_demo, new_id, pcm_f32, tiny_codec,
)

pytestmark = pytest.mark.slow

def read_wav(path) -> np.ndarray:
    audio, sr = sf.read(path, dtype="float32")
    assert sr == 22050
    return audio


def test_streamed_chunks_concatenate_to_the_final_wav(client, live_demo, tiny_engine, tiny_codec):
    result, listener = generate_with_stream(client, live_demo.url)
    status, wav_path, stats_md, plot = result
    assert listener.status == 200 and listener.headers["x-gepard-sample-rate"] == "22050"
    streamed = pcm_f32(bytes(listener.data))
    final = read_wav(wav_path)
    assert len(streamed) == 60 * 1024 + int(22050 * 0.1)  # 60 frames + 100 ms silence
    np.testing.assert_array_equal(streamed, final)
    assert "Done" in status and "1234" in status
    assert "seed used" in stats_md and "runaway" in stats_md and "| frames | 60 |" in stats_md
    assert plot is not None
    # The same request run directly through SynthesisSession gives the same samples.
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest

    host = live_demo.demo.host
    with host.lock:
        direct = SynthesisSession(
            tiny_engine,
            tiny_codec,
            SessionRequest(
                DEFAULTS["text"],
                SamplingSettings(temperature=0.3, seed=1234, max_frames=60),
                StreamSettings(first_chunk_frames=10, chunk_frames=10, fade_ms=20, silence_ms=100),
            ),
        ).run()
    np.testing.assert_array_equal(direct, final)


def test_lookback_mode_stream_equals_its_wav(client, live_demo):
    result, listener = generate_with_stream(client, live_demo.url, decode_mode="lookback", lookback_frames=4,
                                            first_chunk_frames=3, chunk_frames=7, max_frames=30, silence_ms=0)
    streamed = pcm_f32(bytes(listener.data))
    assert len(streamed) == 30 * 1024
    np.testing.assert_array_equal(streamed, read_wav(result[1]))


def test_two_clients_at_once_each_get_their_solo_audio(client, live_demo):
    from gradio_client import Client

    solo = {}
    for seed in (7, 8):
        result, listener = generate_with_stream(client, live_demo.url, seed=seed, max_frames=40)
        solo[seed] = read_wav(result[1])
    assert not np.array_equal(solo[7], solo[8])
    other = Client(live_demo.url, verbose=False)
    out = {}

    def run(c, seed):
        out[seed] = generate_with_stream(c, live_demo.url, seed=seed, max_frames=40)

    threads = [threading.Thread(target=run, args=(c, s)) for c, s in ((client, 7), (other, 8))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for seed in (7, 8):
        result, listener = out[seed]
        np.testing.assert_array_equal(read_wav(result[1]), solo[seed])
        np.testing.assert_array_equal(pcm_f32(bytes(listener.data)), solo[seed])


def test_random_seed_is_reported_and_replays(client, live_demo):
    result, _ = generate_with_stream(client, live_demo.url, random_seed=True, max_frames=20)
    stats_md = result[2]
    seed = int(stats_md.split("| seed used | `")[1].split("`")[0])
    again, _ = generate_with_stream(client, live_demo.url, seed=seed, max_frames=20)
    np.testing.assert_array_equal(read_wav(again[1]), read_wav(result[1]))


BAD = [
    (dict(text=""), "enter some text"),
    (dict(text="   \n\t"), "enter some text"),
    (dict(text="\u200b\u200d\ufeff"), "enter some text"),
    (dict(text="x" * 2001), "limit is 2000"),
    # Outside a control's range: our own check answers, naming the field (no silent clamping).
    (dict(temperature=0), "temperature must be in (0, 5], got 0"),
    (dict(temperature=9), "temperature must be in (0, 5], got 9"),
    (dict(max_frames=0), "max_frames must be in [1, 4096], got 0"),
    (dict(max_frames=5000), "max_frames must be in [1, 4096], got 5000"),
    (dict(chunk_frames=5000), "chunk_frames must be in [1, 200]"),
    (dict(silence_ms=1e9), "silence_ms must be in [0, 2000]"),
    (dict(top_k=2.5), "top_k must be a whole number"),
    (dict(seed=2**63), "seed must be in [-9223372036854775808, 9223372036854775807]"),
    (dict(decode_mode="bogus"), "decode_mode must be one of exact, lookback"),
    # Accepted by the components but not valid settings: our own parse / validate() answers.
    (dict(seed=None), "seed is empty"),
    (dict(max_frames=12.5), "max_frames must be a whole number"),
    # The derailment guardrails (issue 33): each bad value named.
    (dict(repetition_penalty=0.9), "repetition_penalty must be in [1, 2], got 0.9"),
    (dict(repetition_penalty=2.5), "repetition_penalty must be in [1, 2], got 2.5"),
    (dict(repetition_window=-1), "repetition_window must be in [0, 4096], got -1"),
    (dict(force_stop_frames="0"), "force_stop_frames must be in [1, max_frames = 60], got 0"),
    (dict(force_stop_frames="61"), "force_stop_frames must be in [1, max_frames = 60], got 61"),
    (dict(force_stop_frames="soon"), "force_stop_frames must be 'off', 'auto' or a whole number"),
    (dict(force_stop_frames="auto", text="🙂 🙂"), "force_stop_frames 'auto' scales the cap to the text's words"),
]


@pytest.mark.parametrize("over,message", BAD, ids=[m + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_input_is_a_clear_error_and_the_server_keeps_serving(client, live_demo, over, message):
    from gradio_client.exceptions import AppError

    job_id = new_id()
    with pytest.raises(AppError) as err:
        client.predict(*args(job_id, **over), api_name="/generate")
    assert message in str(err.value)
    # The job's stream (had a page opened one) is closed, not left hanging.
    job = live_demo.demo.registry.get(job_id)
    assert job is None or job.finished


def test_odd_unicode_is_spoken_after_cleaning(client, live_demo):
    result, listener = generate_with_stream(
        client, live_demo.url, text="Cafe\u0301 \U0001F406 \u05e9\u05dc\u05d5\u05dd\u200b\x07 ok", max_frames=8
    )
    assert result[0].startswith("Done")
    assert len(listener.data) == (8 * 1024 + int(22050 * 0.1)) * 4
    # ...and the server still serves a plain request.
    result, _ = generate_with_stream(client, live_demo.url, max_frames=8)
    assert result[0].startswith("Done")


def test_bad_job_id_is_refused(live_demo):
    r = httpx.get(f"{live_demo.url}/gepard/pcm/..%2f..%2fetc", timeout=10)
    assert r.status_code in (400, 404)
    r = httpx.get(f"{live_demo.url}/gepard/pcm/short", timeout=10)
    assert r.status_code == 400


def test_a_job_id_still_held_cannot_be_taken_by_a_second_request(client, live_demo):
    # The queue already runs one generate at a time; this guards the mailbox itself: while a
    # job is still held (here: done, with no listener having collected it), a second request
    # with its id would append a second utterance to the first one's stream.
    from gradio_client.exceptions import AppError

    job_id = new_id()
    assert client.predict(*args(job_id, max_frames=5), api_name="/generate")[0].startswith("Done")
    assert live_demo.demo.registry.get(job_id) is not None
    with pytest.raises(AppError, match="already running or done"):
        client.predict(*args(job_id, max_frames=5), api_name="/generate")


def test_finished_jobs_are_forgotten_once_streamed(client, live_demo):
    result, listener = generate_with_stream(client, live_demo.url, max_frames=5)
    assert live_demo.demo.registry.get(listener.job_id) is None  # audio freed with the stream
    stats = live_demo.demo.controller.stats_for(listener.job_id)
    assert stats.frames == 5 and stats.complete


def test_a_flood_of_anonymous_listeners_locks_nobody_out(client, live_demo):
    """64 GETs for made-up ids, each dropped after 0.5 s, used to fill the job registry and
    answer 429 to everyone for minutes. Now they hold nothing a Generate needs."""
    codes = flood_listeners(live_demo.url)
    assert set(codes) <= {"dropped", 429}, codes  # waited (holding a slot of this client's) or refused
    reg = live_demo.demo.registry
    deadline = time.monotonic() + 10  # the server sees each hang-up a little after it happens (more under load)
    while reg.open_listeners() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert reg.open_listeners() == 0  # the dropped ones hold nothing now
    result, listener = generate_with_stream(client, live_demo.url, max_frames=10)
    assert result[0].startswith("Done") and listener.status == 200  # locked out, it was 429
    assert len(listener.data) == (10 * 1024 + int(22050 * 0.1)) * 4


def test_refused_input_logs_one_line_without_a_traceback(client, live_demo, caplog, capfd):
    import logging

    from gradio_client.exceptions import AppError

    caplog.set_level(logging.INFO, logger="gepard_demo.ui")
    for over in (dict(max_frames=0), dict(text="")):
        with pytest.raises(AppError):
            client.predict(*args(new_id(), **over), api_name="/generate")
    lines = [r.getMessage() for r in caplog.records if r.name == "gepard_demo.ui" and "rejected" in r.getMessage()]
    assert len(lines) == 2 and "max_frames must be in [1, 4096]" in lines[0] and "enter some text" in lines[1]
    assert all("\n" not in line for line in lines)
    assert "Traceback" not in capfd.readouterr().err


def test_api_parameters_are_named_after_the_controls(client):
    params = [p["parameter_name"] for p in client.view_api(return_format="dict", print_info=False)
              ["named_endpoints"]["/generate"]["parameters"]]
    assert params == ["job_id"] + ORDER


def test_the_guardrails_through_the_api_end_the_run_and_say_so(client, live_demo):
    # A force stop at 20 frames (the budget is 60, the tiny's stop head will not fire at 0.99):
    # 20 frames of audio plus the end silence, and the stats say who ended it and show the probe.
    result, listener = generate_with_stream(client, live_demo.url, stop_threshold=0.99, repetition_penalty=1.3,
                                            repetition_window=0, force_stop_frames="20")
    assert result[0].startswith("Done")
    assert len(listener.data) == (20 * 1024 + int(22050 * 0.1)) * 4
    stats = result[2]
    assert "force-stopped" in stats and "force_stop_frames 20" in stats
    assert "frames 0-9:" in stats and "nats" in stats
