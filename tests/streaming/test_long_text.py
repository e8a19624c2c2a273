"""A long text's segments generated ahead of the one playing (issue 34), on the real scheduler and
the tiny model: each segment's frames are the same however it was made (one after another, ahead,
beside another visitor, alone through engine.generate with the seed derived for it by hand);
Stop ends every segment's request at once, with requests that never end by themselves; a segment
that runs on does not hold the others back; and a visitor's stream takes a look-ahead row's place
at once, the preempted segment going on from its frames unchanged."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pytest
import torch
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)
from tests.support.hold_fixtures import HANG_S, endless_text_patch, held_codec, wait_until, within
from tests.support.running_session import Running

from gepard_demo.batching.scheduler import BatchScheduler
from gepard_demo.model.batch import DecodeBatch
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.text_input import split_text

STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)
SENTENCES = ["The first part of a long story begins here and goes on for a while.",
             "Then the second part follows, with different words in it.",
             "A third part closes the story, and then it ends."]


def _text(parts: int = 3) -> str:
    # Each part one sentence of 250-350 characters: no two fit one segment (SEGMENT_CHARS 400).
    return " ".join(", ".join([s.rstrip(".")] * 5) + "." for s in SENTENCES[:parts])


def _sampling(**kw) -> SamplingSettings:
    return SamplingSettings(**{"seed": 21, "temperature": 0.8, "max_frames": 24, "stop_threshold": 0.999, **kw})


def _seed_by_hand(seed: int, index: int) -> int:
    # The documented rule (streaming/segments.py): the request's seed for the first segment, then
    # a 63-bit blake2b of "gepard-segment|seed|index".
    if index == 0:
        return seed
    return int.from_bytes(hashlib.blake2b(f"gepard-segment|{seed}|{index}".encode(), digest_size=8).digest(),
                          "little") >> 1


def _session(engine, codec, text, sampling, look_ahead):
    session = SynthesisSession(engine, codec, SessionRequest(text, sampling, STREAM), look_ahead=look_ahead)
    audio = session.run()
    return session, audio


@pytest.fixture()
def scheduler(tiny_engine):
    s = BatchScheduler(tiny_engine, BatchingSettings(max_batch=4, admission="cap"))
    yield s
    s.close()


def test_each_segments_frames_are_the_same_however_it_was_made(tiny_engine, tiny_codec, scheduler):  # noqa: F811
    text, s = _text(), _sampling()
    segments = split_text(text)
    assert len(segments) == 3
    one_by_one, audio_seq = _session(tiny_engine, tiny_codec, text, s, look_ahead=0)
    ahead, audio_ahead = _session(scheduler, tiny_codec, text, s, look_ahead=2)
    assert ahead.stats.segment_frames == one_by_one.stats.segment_frames == [24, 24, 24]
    assert np.array_equal(ahead.codes(), one_by_one.codes())
    assert np.array_equal(audio_ahead, audio_seq)  # one decoder stream: the same seams and end
    # Each segment alone, with its seed derived by hand: the same frames.
    seeds = [_seed_by_hand(s.seed, i) for i in range(3)]
    assert seeds[0] == s.seed and len(set(seeds)) == 3
    alone = [tiny_engine.generate([seg], s.replace(seed=seed))[0].frames for seg, seed in zip(segments, seeds)]
    assert np.array_equal(one_by_one.codes(), torch.cat(alone).numpy().astype(np.int16))
    # Beside another visitor's request, the same again.
    other = SynthesisSession(
        scheduler,
        tiny_codec,
        SessionRequest("Another visitor talks meanwhile.", _sampling(seed=5, max_frames=60), STREAM),
    )
    neighbour = Running(other)
    beside, _ = _session(scheduler, tiny_codec, text, s, look_ahead=2)
    wait_until(neighbour.ended)
    assert np.array_equal(beside.codes(), one_by_one.codes())


@pytest.mark.parametrize("where", ["running", "codec held"])
def test_stop_ends_every_segments_request_at_once(tiny_engine, tiny_codec, scheduler, where):  # noqa: F811
    # Every request runs forever; in "codec held" the session's own thread is stuck in a codec push
    # when Stop comes (a decoder call is not interrupted), so only Stop itself can free the rows.
    undo = endless_text_patch(tiny_engine.tokenizer, text=None)
    try:
        with held_codec(tiny_codec, hold_from=1 if where == "codec held" else 10**9) as codec:
            session = SynthesisSession(scheduler, codec, SessionRequest(_text(), _sampling(), STREAM), look_ahead=2)
            run = Running(session)
            wait_until(lambda: scheduler.load()["running"] == 3, what="the segment playing and two ahead in the batch")
            if where == "codec held":
                wait_until(codec.gate.entered.is_set, what="the session's thread held in a codec push")
            session.cancel()
            within(lambda: scheduler.load()["running"] == 0 and scheduler.load()["waiting"] == 0)
            assert not run.ended() or where == "running"
        wait_until(run.ended)
        assert session.stats.cancelled
    finally:
        undo()


def test_a_segment_that_runs_on_does_not_hold_the_others(tiny_engine, tiny_codec, scheduler):  # noqa: F811
    text = _text()
    first = split_text(text)[0]
    undo = endless_text_patch(tiny_engine.tokenizer, text=first)  # the first segment never ends by itself
    try:
        session = SynthesisSession(scheduler, tiny_codec, SessionRequest(text, _sampling(), STREAM), look_ahead=2)
        run = Running(session)
        wait_until(lambda: session.progress()["generated"][1:] == [True, True], what="segments 2 and 3 made")
        progress = session.progress()
        assert progress["generated"][0] is False and progress["segment"] == 0  # still on the first
        # Their audio plays only after the first one's, so none of it counts as ready in order yet:
        # counted, their 2 x 24 frames would be in ahead_s. What is there is the first segment's own
        # frames made and not yet read, which a loaded host lets grow (past 24 once in a whole suite).
        assert progress["ahead_s"] < 2 * 24 / 21.5
        session.cancel()
        wait_until(run.ended)
    finally:
        undo()


def test_a_visitors_stream_takes_a_look_ahead_rows_place_at_once(tiny_engine, tiny_codec, monkeypatch):  # noqa: F811
    scheduler = BatchScheduler(tiny_engine, BatchingSettings(max_batch=2, admission="cap"))
    # The scheduler's thread stops once, inside a step, when both places hold the long text's rows
    # and the playing one has its first chunk's frames: so the visitor arrives at a full batch
    # however fast the 60-frame segments would otherwise end (on an idle host the look-ahead row
    # could finish first and free its place, and no preemption would be needed).
    full, go = threading.Event(), threading.Event()
    sample = DecodeBatch.sample

    def held_when_full(batch):
        playing = min(batch.live, default=None)  # the first segment was admitted first
        if not full.is_set() and len(batch.live) == 2 and batch.live[playing].committed >= STREAM.first_chunk_frames:
            full.set()
            go.wait(HANG_S)
        return sample(batch)

    monkeypatch.setattr(DecodeBatch, "sample", held_when_full)
    try:
        text, s = _text(), _sampling(max_frames=60)
        want, _ = _session(tiny_engine, tiny_codec, text, s, look_ahead=0)
        long_text = SynthesisSession(scheduler, tiny_codec, SessionRequest(text, s, STREAM), look_ahead=2)
        chunks = iter(long_text)
        first = next(chunks)  # its first chunk: segment 1 plays, segment 2 runs ahead beside it
        assert len(first.samples)
        wait_until(full.is_set, what="the batch full: playing + ahead")
        assert scheduler.load()["running"] == 2
        queued = scheduler.load()["waiting"]  # the long text's third segment may wait there too
        undo = endless_text_patch(tiny_engine.tokenizer, text="A visitor")
        try:
            visitor = SynthesisSession(
                scheduler, tiny_codec, SessionRequest("A visitor arrives now.", _sampling(seed=8), STREAM)
            )
            seen = Running(visitor)
            wait_until(lambda: scheduler.load()["waiting"] == queued + 1, what="the visitor queued at the full batch")
            go.set()
            # Admitted while both places were taken by the long text: a look-ahead row gave its place.
            wait_until(lambda: visitor.stats.frames > 0, what="the visitor's first frames")
            assert visitor.wait_line() is None and scheduler.load()["preemptions"] >= 1
            visitor.cancel()
            wait_until(seen.ended)
        finally:
            undo()
        assert scheduler.load()["preemptions"] >= 1
        rest = list(chunks)
        assert long_text.stats.complete and rest
        assert np.array_equal(long_text.codes(), want.codes())  # the preempted segment went on unchanged
    finally:
        go.set()
        scheduler.close()


def test_our_server_streams_a_long_text_made_ahead_as_one_after_another_makes_it(tiny_engine, tiny_codec):  # noqa: F811
    import httpx
    from tests.support.app_fixtures import serve_in_thread

    from gepard_demo.serving.protocol import pcm16
    from gepard_demo.serving.server import build_speech_app

    text, s = _text(), _sampling()
    _, want = _session(tiny_engine, tiny_codec, text, s, look_ahead=0)
    app = build_speech_app(tiny_engine, tiny_codec, s.replace(seed=None), STREAM,
                           batching=BatchingSettings(max_batch=4, admission="cap", look_ahead=2))
    body = {"input": text, "seed": s.seed, "max_new_tokens": s.max_frames, "response_format": "pcm"}
    with serve_in_thread(app, "speech-long-text") as port, httpx.Client(base_url=f"http://127.0.0.1:{port}",
                                                                        timeout=120) as client:
        whole = client.post("/v1/audio/speech", json=body)
        assert whole.status_code == 200 and whole.content == pcm16(want)
        with client.stream("POST", "/v1/audio/speech", json={**body, "stream": True, "stream_format": "audio"}) as r:
            streamed = b"".join(r.iter_bytes())
        assert streamed == pcm16(want)
        assert app.state.scheduler.load()["running"] == 0


def test_a_streams_pace_is_that_of_its_last_frames():
    """A long text's later segments join the batch after its first chunk and the pace falls then:
    the pace its progress reports (the page's start buffer) is over the last frames, not since the first."""
    import time
    from types import SimpleNamespace

    from gepard_demo.batching.tickets import PACE_FRAMES, Ticket, TicketFrames

    ticket = Ticket(number=0, stream=True, request=None, on_step=None)
    now = time.perf_counter()
    fast = [now - 1.5 + 0.005 * k for k in range(PACE_FRAMES)]  # alone: 200 frames/s
    slow = [now - 0.1 * (PACE_FRAMES - 1 - k) for k in range(PACE_FRAMES)]  # with the rows: 10 frames/s
    for t in fast + slow:
        ticket.frames += 1
        ticket.recent.append(t)
    ticket.first_frame_at = fast[0]
    pace = TicketFrames(SimpleNamespace(cancel=lambda ticket: None), ticket, None).pace()
    assert pace == pytest.approx((PACE_FRAMES - 1) / 21.5 / (0.1 * (PACE_FRAMES - 1)), rel=0.05)  # 0.465
    assert pace < 0.5 < 2 * PACE_FRAMES / 21.5 / 1.5  # since the first frame it would say 0.62


def test_the_hosts_pace_hint_is_one_streams():
    """The player's first start buffer comes from X-Gepard-Speed (controller.rate_hint): a long
    text's speech / wall is its rows' pace together, so it is left out."""
    from types import SimpleNamespace

    from gepard_demo.streaming.chunks import SynthesisStats
    from gepard_demo.ui.jobs.controller import DemoController
    from gepard_demo.ui.jobs.recent import RecentRuns

    one = SynthesisStats(speech_s=10.0, wall_s=10.0)
    chapter = SynthesisStats(speech_s=40.0, wall_s=10.0, segments=8)
    recent = RecentRuns()
    for job, stats in (("a", one), ("b", chapter), ("c", chapter)):
        recent.note(job, stats)
    controller = SimpleNamespace(recent=recent, host=SimpleNamespace(warm_rate=3.0))
    assert DemoController.rate_hint(controller) == 1.0
    controller.recent = RecentRuns()
    controller.recent.note("b", chapter)
    assert DemoController.rate_hint(controller) == 3.0  # none of one stream: the warm-up's
