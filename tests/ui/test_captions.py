"""The page's captions: each segment's words timed as soon as its audio is complete, off the
stream's path, fetched by the player from /gepard/words/{job}, and the take's SRT / VTT. Real
speech: the page's session runs the tiny engine through a codec whose audio is a Piper recording
(alignment_fixtures.PiperCodec) with silences of known length between the words."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest
from tests.support.alignment_fixtures import RATE, WORD_GAPS, WORDS, PiperCodec, aligner, spoken, say, trimmed  # noqa: F401
from tests.support.app_fixtures import Listener, args, new_id, serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)

from gepard_demo.alignment.aligner import NO_SPEECH
from gepard_demo.settings import StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.text_input import split_text
from gepard_demo.ui.captions import CaptionDesk

SPEECH = spoken(WORDS, WORD_GAPS)
CODEC = PiperCodec(SPEECH.audio)
STREAM = StreamSettings(first_chunk_frames=10, chunk_frames=10, fade_ms=20.0)  # the page's (the fade is in silence)
EDGE_S = 0.1


def _words(url: str, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = httpx.get(f"{url}/gepard/words/{job_id}").json()
        if got["state"] in ("done", "off"):
            return got
        time.sleep(0.2)
    raise AssertionError(f"no words for {job_id} after {timeout} s: {got}")


def _demo(engine, codec, aligner_settings, wav_dir):
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.server import build_app

    host = ModelHost(engine, codec, requested="tiny").batch(BatchingSettings(max_batch=1, codec_batching=False))
    return build_app(host, stream=STREAM, wav_dir=wav_dir, captions=aligner_settings)


@pytest.fixture(scope="module")
def piper_page(tiny_engine, aligner, tmp_path_factory):  # noqa: F811
    demo = _demo(tiny_engine, CODEC, aligner.settings, tmp_path_factory.mktemp("wavs-captions"))
    with serve_in_thread(demo.app, "demo-captions") as port:
        yield f"http://127.0.0.1:{port}", demo


def _generate(url, text=SPEECH.text, frames=CODEC.frames):
    from gradio_client import Client

    job_id = new_id()
    listener = Listener(url, job_id)
    listener.start()
    listener.connected.wait(10)
    Client(url, verbose=False).submit(*args(job_id, text=text, stop_threshold=0.99, max_frames=frames),
                                      api_name="/generate").result(timeout=120)
    listener.join(30)
    return job_id


def test_a_generates_words_come_where_they_are_spoken_with_srt_and_vtt(piper_page):
    url, _ = piper_page
    job_id = _generate(url)
    got = _words(url, job_id)
    assert [w["w"] for w in got["words"]] == WORDS and {w["st"] for w in got["words"]} == {"aligned"}
    for w, (start, end) in zip(got["words"], SPEECH.edges):
        assert abs(w["s"] - start) <= EDGE_S and abs(w["e"] - end) <= EDGE_S, (w, start, end)
    assert got["summary"].startswith("8 of 8 words aligned in ")
    srt = httpx.get(f"{url}/gepard/words/{job_id}.srt")
    assert srt.status_code == 200 and srt.text.startswith("1\n00:00:00,")
    first_start = float(srt.text.split("\n")[1][6:12].replace(",", "."))
    assert abs(first_start - SPEECH.edges[0][0]) <= EDGE_S
    vtt = httpx.get(f"{url}/gepard/words/{job_id}.vtt").text
    assert vtt.startswith("WEBVTT\n") and "Please call Smith" in vtt


def test_noise_gets_no_timestamps_and_the_page_says_why(tiny_engine, tiny_codec, aligner, tmp_path):  # noqa: F811
    """The tiny model's own audio (random weights: noise) on a page with captions."""
    demo = _demo(tiny_engine, tiny_codec, aligner.settings, tmp_path)
    with serve_in_thread(demo.app, "demo-captions-noise") as port:
        url = f"http://127.0.0.1:{port}"
        got = _words(url, _generate(url, "Random weights make noise.", 40))
    assert got["words"] == [] and got["summary"] == NO_SPEECH


@pytest.mark.slow
def test_a_segment_is_aligned_as_soon_as_its_audio_is_complete_and_feeding_never_waits(tiny_engine, aligner):  # noqa: F811
    """A two-segment text, each segment its own Piper sentences padded to the frame budget: the
    first segment's words are there while the session has not gone past the second's first chunk,
    and handing chunks over takes no time even while the aligner is busy."""
    text = ("The quick brown fox jumps over the lazy dog. " * 5 + "Then it runs into the park and hides. " * 6).strip()
    one, two = split_text(text)  # the session cuts it so; each segment gets its own Piper recording
    a, b = trimmed(say(one)), trimmed(say(two))
    frames = -(-max(len(a), len(b)) // 1024) + 5
    audio = np.zeros(2 * frames * 1024, np.float32)
    audio[: len(a)], audio[frames * 1024: frames * 1024 + len(b)] = a, b
    sampling = tiny_engine.default_sampling().replace(stop_threshold=0.99, max_frames=frames, seed=1)
    session = SynthesisSession(tiny_engine, PiperCodec(audio), SessionRequest(text, sampling, STREAM))
    desk = CaptionDesk(aligner)
    slowest, first_part = 0.0, None
    for chunk in session:
        t = time.perf_counter()
        desk.feed("job-number-two", session, chunk.samples)
        slowest = max(slowest, time.perf_counter() - t)
        if first_part is None and chunk.frame_start >= frames:  # the second segment is playing
            deadline = time.monotonic() + 60
            while desk.words("job-number-two")["segments"]["aligned"] < 1 and time.monotonic() < deadline:
                time.sleep(0.05)
            first_part = desk.words("job-number-two")
    desk.finish("job-number-two", session)
    assert first_part["state"] == "pending" and first_part["segments"] == {"aligned": 1, "of": 2}
    assert [w["w"] for w in first_part["words"]] == one.split()
    assert slowest < 0.02, slowest  # a counter and a queue put: never an alignment
    whole = desk.alignment("job-number-two", wait_s=60)
    second = whole.words[len(one.split()):]
    assert [w.written for w in second] == two.split()
    assert abs(second[0].start - (frames * 1024 / RATE + 0.0)) <= 0.3  # placed where its samples are


def test_a_held_aligner_never_holds_the_generate(piper_page):
    """The aligner busy (its lock held): the Generate still ends and returns; the words wait."""
    url, demo = piper_page
    lock = demo.controller.captions.aligner._lock
    lock.acquire()
    try:
        done = threading.Event()
        out = {}
        t = threading.Thread(target=lambda: (out.update(job=_generate(url)), done.set()), daemon=True)
        t.start()
        assert done.wait(60), "the Generate waited for the aligner"
        assert httpx.get(f"{url}/gepard/words/{out['job']}").json()["state"] == "pending"
    finally:
        lock.release()
    assert _words(url, out["job"])["state"] == "done"


def test_in_front_of_a_server_that_does_not_list_it_captions_are_off_and_say_which_field(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app
    from gepard_demo.ui.hosts.served import load_served_host
    from gepard_demo.ui.server import caption_desk

    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling(), StreamSettings())
    with serve_in_thread(app, "speech-no-words") as port:
        host = load_served_host(f"http://127.0.0.1:{port}")
    desk = caption_desk(host, None)
    assert not desk.on and desk.words("x")["note"].startswith("no captions: word_timestamps: the speech server at ")
    assert not host.new_session(SessionRequest("Hello.", tiny_engine.default_sampling(), StreamSettings())).word_timestamps


def test_in_front_of_our_server_the_page_shows_the_servers_words(tiny_engine, aligner, tmp_path):  # noqa: F811
    """The page asks a server that lists word_timestamps for them over SSE: the words under the
    player are the server's, where the speech is."""
    from gepard_demo.serving.server import build_speech_app
    from gepard_demo.ui.hosts.served import load_served_host
    from gepard_demo.ui.server import build_app

    sampling = tiny_engine.default_sampling().replace(stop_threshold=0.99, max_frames=CODEC.frames)
    app = build_speech_app(tiny_engine, CODEC, sampling, StreamSettings(), aligner=aligner,
                           batching=BatchingSettings(codec_batching=False))
    with serve_in_thread(app, "speech-words-for-page") as port:
        host = load_served_host(f"http://127.0.0.1:{port}")
        demo = build_app(host, sampling.replace(seed=None), StreamSettings(), wav_dir=tmp_path)
        with serve_in_thread(demo.app, "page-in-front") as page_port:
            url = f"http://127.0.0.1:{page_port}"
            got = _words(url, _generate(url))
    assert [w["w"] for w in got["words"]] == WORDS
    for w, (start, end) in zip(got["words"], SPEECH.edges):
        assert abs(w["s"] - start) <= EDGE_S and abs(w["e"] - end) <= EDGE_S, (w, start, end)
