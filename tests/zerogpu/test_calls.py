"""A Generate behind ZeroGPU is cut into calls that each ask for what their part is expected to
take (gepard_demo/zerogpu/budget.py), and the calls make one utterance: the chunks of all of them
are, sample for sample, the audio one in-process session makes, across segments and across a
segment that outlasts its call. A stream carried from call to call through pickling (the forked
worker) loses nothing: not a frame, not the codec's state, not the fade."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
import torch

from gepard_demo.batching.scheduler import BatchScheduler
from gepard_demo.codec import load_codec
from gepard_demo.model.engine import GepardEngine
from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.streaming.session import AudioChunk, SynthesisSession, SynthesisStats
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.text_input import MAX_TEXT_CHARS, split_text
from gepard_demo.zerogpu import tasks
from gepard_demo.units import expected_speech_s, word_count
from gepard_demo.zerogpu.budget import CallPlan, GpuBudget, StartTimes
from gepard_demo.zerogpu.carry import CallBounds, SegmentFrames, SessionCarry
from gepard_demo.zerogpu.forked import Forked
from gepard_demo.zerogpu.resident import Resident
from gepard_demo.zerogpu.session import GpuSession
from gepard_demo.model.request import FrameRequest

pytestmark = [pytest.mark.numerics, pytest.mark.forks]  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

SENTENCE = "The weather is sunny today, with a light breeze from the west."
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=9, fade_ms=20.0, silence_ms=40.0)


@pytest.fixture(scope="module")
def reference(tiny_cache_dir):
    engine = GepardEngine.load("tiny", cache_dir=tiny_cache_dir)
    return engine, load_codec(engine.codec_source())


@pytest.fixture(scope="module")
def forked(tiny_cache_dir):
    engine = GepardEngine.load("tiny", cache_dir=tiny_cache_dir)
    runner = Forked(Resident.place(engine, load_codec(engine.codec_source()), guarded=True), workers=2)
    runner.starts = StartTimes()  # what its fresh workers report, across this module's sessions
    yield runner
    runner.close()


def _paragraph(chars: int) -> str:
    text, k = "", 0
    while len(text) < chars - 60:
        k += 1
        text += f"Sentence number {k} says a few more words about the weather. "
    return text.strip()


def test_a_default_generate_of_a_sentence_asks_for_at_most_30_s():
    b, s = GpuBudget(), SamplingSettings()  # the page's defaults: a 1000-frame budget
    frames = b.call_frames(SENTENCE, 0, s)
    assert frames == int(np.ceil(b.margin * expected_speech_s(word_count(SENTENCE)) * 21.5))  # 1.5 x (0.7 + 0.4 x 12 words)
    assert b.ask_s(frames, s, 0) <= 30
    # Guided every frame it asks for more, still within 30 s; the old whole-budget ask was 44 s.
    g = s.replace(cfg_scale=2.5)
    assert b.ask_s(frames, s, 0) < b.ask_s(b.call_frames(SENTENCE, 0, g), g, 0) <= 30


def test_no_call_asks_past_a_segments_force_stop():
    b, s = GpuBudget(), SamplingSettings(force_stop_frames=30)
    assert b.call_frames(SENTENCE, 0, s) == 30 and b.call_frames(SENTENCE, 20, s) == 10
    auto = s.replace(force_stop_frames="auto")  # 12 words: int(4 x 5.5 s x 21.53) = 473 -> the clamp's 300
    whole = b.call_frames(SENTENCE, 0, SamplingSettings())
    assert b.call_frames(SENTENCE, 300 - 5, auto) == 5 and b.call_frames(SENTENCE, 0, auto) == min(whole, 300)


@pytest.mark.parametrize("guided", [False, True], ids=["plain", "guided"])
def test_no_call_of_any_generate_up_to_2000_characters_asks_for_more_than_60_s(guided):
    b = GpuBudget()
    s = SamplingSettings(max_frames=4096, cfg_scale=2.5 if guided else 1.0)
    text = _paragraph(MAX_TEXT_CHARS)
    assert len(text) <= MAX_TEXT_CHARS and len(split_text(text)) >= 5
    asks = []
    for segment in split_text(text):
        done = 0
        while done < s.max_frames:  # a segment that never stops: every call up to its budget
            frames = b.call_frames(segment, done, s)
            asks.append(b.ask_s(frames, s, done))
            done += frames
    assert max(asks) <= 60, max(asks)
    assert min(asks) > b.start_s  # each budgets a cold start


@pytest.mark.parametrize("guided", [False, True], ids=["plain", "guided"])
def test_a_call_whose_part_would_ask_over_60_s_asks_60_s_at_most_and_close_to_it(guided):
    """A 400-character segment after measured cold starts of 20 to 45 s: past some start its call,
    uncapped, would ask start + frames x per-frame cost > 60 s. The session's request (what reaches
    ZeroGPU) then asks 60 s at most and no more than one 10% step below the most frames that fit
    under 60 s, by hand; below that start it asks for all the frames it wants. Some start puts
    the ask at 60 itself: the cap is reached, and a cap above it would show."""
    s = SamplingSettings(max_frames=4096, cfg_scale=2.5 if guided else 1.0)
    segment = split_text(_paragraph(MAX_TEXT_CHARS))[0]
    words = len(segment.split())
    b = GpuBudget()
    per_frame = b.step_s + b.codec_s_per_frame + (b.step_s * b.guided_step_extra if guided else 0.0)  # s a frame
    wanted = math.ceil(1.5 * (0.7 + 0.4 * words) * 22050 / 1024)  # 1.5 x the expected speech, in codec frames
    asks, capped = [], 0
    for start in np.arange(20.0, 45.5, 0.5):
        starts = StartTimes()
        starts.note(start)
        session = GpuSession(None, SessionRequest(segment, s, STREAM), sample_rate=22050, starts=starts)
        assert len(session.segments) == 1 and 60 <= words
        request = session.request()
        assert len(request.plan.frames) == 1  # the text's only segment
        frames = request.plan.frames[0]
        assert request.ask_s == math.ceil(start + frames * per_frame - 1e-9), start
        asks.append(request.ask_s)
        if start + wanted * per_frame <= 60:
            assert frames == wanted, start
            continue
        capped += 1
        fits = math.floor((60 - start) / per_frame + 1e-9)  # the most frames a 60 s ask covers
        assert 0.9 * fits - 1 <= frames <= fits, (start, frames, fits)
    assert max(asks) == 60 and capped >= 10, (asks, capped)


def test_a_reference_voice_or_an_eval_batch_may_ask_up_to_240_s_and_no_more():
    """The other calls' cap, reached from both sides, by hand: a batch of 16 rows costs
    0.030 x (1 + log2(16) / 4) + 0.004 x 16 = 0.124 s a frame, so after the 10 s start 1854 frames
    ask 239.9 s (240) and 1855 ask 240.02 s, refused; a reference voice costs 0.3 s a second, so
    766 s of it ask 239.8 s (240) and 767 s ask 240.1 s, refused."""
    b = GpuBudget()
    assert b.batch_s(16, 1854) == 240
    with pytest.raises(SettingsError, match="16 rows x 1855 frames would hold the GPU for up to 240 s, above the 240 s"):
        b.batch_s(16, 1855)
    assert b.prefix_s(766.0) == 240 and b.prefix_s(0.0, start_s=240.0) == 240  # 240 s itself may be asked
    with pytest.raises(SettingsError, match="767 s of reference .* above the 240 s"):
        b.prefix_s(767.0)


def test_asks_follow_the_text_the_measured_cold_start_and_the_budget():
    b, s = GpuBudget(), SamplingSettings()
    short, long_ = b.call_frames("Hi.", 0, s), b.call_frames(SENTENCE * 3, 0, s)
    assert short == b.min_call_frames < long_
    assert b.call_frames(SENTENCE, 990, s) == 10  # what the frame budget leaves
    frames = b.call_frames(SENTENCE, 0, s)
    assert b.ask_s(frames, s, 0, start_s=3.0) < b.ask_s(frames, s, 0) < b.ask_s(frames, s, 0, start_s=25.0)
    starts = StartTimes()
    assert starts.estimate() is None
    for seconds in (4.0, 9.5, 6.0):
        starts.note(seconds)
    assert starts.estimate() == 9.5  # the longest of the last few: a slow start is budgeted for again
    g = s.replace(cfg_scale=2.0, cfg_frames=20)
    assert b.ask_s(frames, g, 20) == b.ask_s(frames, s, 20)  # past cfg_frames a call has no guidance row


def _carry_at(segment: int, read: int = 0, ahead=None) -> SessionCarry:
    """Where a session handed over, as far as planning the next call reads it."""
    return SessionCarry(segment, np.zeros((read, 32), np.int64) if read else None, {}, [], SynthesisStats(),
                        np.zeros((0, 32), np.int64), ahead or {})


def _made_ahead(frames: int, ended: str | None = None) -> SegmentFrames:
    steps = frames + (ended == "stop")
    return SegmentFrames(np.zeros((frames, 32), np.int64), [0.0] * steps, [0.0] * steps, [0.0] * frames, ended)


def test_a_2000_character_generate_takes_two_calls_of_three_segments_asked_by_hand():
    """The page's defaults, cold start 10 s. Each segment is given 1.5 x its expected frames: 876 for
    66 words (1.5 x 27.1 s x 21.53), 449 for the last one's 33. A call's rows step together, a step
    of r rows costing 0.030 x (1 + log2(r) / 4) s, each frame 4 ms of codec. Four rows would ask
    10 + 876 x 0.045 + 4 x 876 x 0.004 = 63.4 s, over 60; three ask 10 + 876 x 0.030 x 1.396 +
    3 x 876 x 0.004 = 57.2 -> 58 s. The next three: 449 steps at three rows and 427 at two,
    10 + 0.030 x (449 x 1.396 + 427 x 1.25) + 2201 x 0.004 = 53.6 -> 54 s. In all 112 s in two
    calls, where one call a segment asked 5 x 40 + 26 = 226 s in six. Three rows is also the
    default's most (max_rows), and allowing four changes nothing here."""
    text = _paragraph(MAX_TEXT_CHARS)
    segments = split_text(text)
    assert [len(seg.split()) for seg in segments] == [66] * 5 + [33]
    rate = 22050 / 1024
    want = [math.ceil(1.5 * (0.7 + 0.4 * len(seg.split())) * rate) for seg in segments]
    assert want == [876] * 5 + [449]

    def step(rows):
        return 0.030 * (1 + math.log2(rows) / 4)

    assert 10 + 876 * step(4) + 4 * 876 * 0.004 > 60
    first = math.ceil(10 + 876 * step(3) + 3 * 876 * 0.004)
    second = math.ceil(10 + 449 * step(3) + 427 * step(2) + (876 + 876 + 449) * 0.004)
    assert (first, second) == (58, 54)
    for rows in (3, 4):
        session = GpuSession(
            None, SessionRequest(text, SamplingSettings(), STREAM), sample_rate=22050, budget=GpuBudget(max_rows=rows)
        )
        request = session.request()
        assert request.plan.segments == range(0, 3) and request.plan.frames == (876, 876, 876)
        assert request.ask_s == first
    # The first three ended in that call; the session handed over where the fourth begins.
    request = session.request(_carry_at(3))
    assert request.plan.segments == range(3, 6) and request.plan.frames == (876, 876, 449)
    assert request.ask_s == second
    # One row a call: a segment's call, as before.
    before = GpuSession(
        None, SessionRequest(text, SamplingSettings(), STREAM), sample_rate=22050, budget=GpuBudget(max_rows=1)
    )
    asks = []
    for k in range(6):
        request = before.request(_carry_at(k) if k else None)
        assert request.plan.frames == (want[k],)
        asks.append(request.ask_s)
    assert asks == [math.ceil(10 + f * 0.034) for f in want] == [40] * 5 + [26]


def test_a_call_counts_what_each_segment_already_has():
    """Mid-text, default budget (1000 frames a segment): the playing segment has 500 frames, all
    decoded; the next has 300 made ahead, not decoded; the third ended ahead with 400 (decoded in
    this call, not made again: no row); the fourth has none. Rows get min(876, what the budget
    leaves): 500, 700, -, 876; steps: 500 at three rows, 200 at two, 176 at one; decoded: those
    frames and the 700 carried ones. 10 + 0.030 x (500 x 1.396 + 200 x 1.25 + 176) + 0.004 x 2776
    = 54.8 -> 55 s; a fifth segment as a fourth row (four allowed here) would ask 62.1 s, so the
    call stops there."""
    text = _paragraph(MAX_TEXT_CHARS)
    ahead = {1: _made_ahead(300), 2: _made_ahead(400, "stop")}
    four = GpuBudget(max_rows=4)
    request = GpuSession(
        None, SessionRequest(text, SamplingSettings(), STREAM), sample_rate=22050, budget=four
    ).request(_carry_at(0, 500, ahead))
    assert request.plan.segments == range(0, 4) and request.plan.frames == (500, 700, 0, 876)

    def rows(r):
        return 1 + math.log2(r) / 4

    assert request.ask_s == math.ceil(10 + 0.030 * (500 * rows(3) + 200 * rows(2) + 176) + 0.004 * 2776) == 55
    assert 10 + 0.030 * (500 * rows(4) + 200 * rows(3) + 176 * rows(2)) + 0.004 * (2776 + 876) > 60
    # Guided on every frame, each guidance row adds 0.3 of its segment's share of a step: with the
    # fourth row 10 + 0.039 x 1124.1 + 11.1 = 64.9 s, over 60; without it 49.8 -> 50 s.
    guided = GpuSession(
        None, SessionRequest(text, SamplingSettings(cfg_scale=2.5), STREAM), sample_rate=22050, budget=four
    )
    request = guided.request(_carry_at(0, 500, ahead))
    assert request.plan.frames == (500, 700, 0)  # the fourth segment's row no longer fits
    assert request.ask_s == math.ceil(10 + 0.030 * 1.3 * (500 * rows(2) + 200) + 0.004 * 1900) == 50


def test_a_call_that_begins_on_a_segment_made_ahead_still_makes_the_next_one():
    """The session stopped where segment 1 begins, which ended ahead with 400 frames not decoded;
    a measured cold start of 45 s. Decoding them asks 45 + 1.6 s; the next segment's 876 frames
    as well would ask 45 + 876 x 0.034 + 1.6 = 76.4 s, so the row is cut in 10% steps until the
    call fits under 60 s, as a lone segment's block always was, rather than left to a call of its own."""
    text = _paragraph(MAX_TEXT_CHARS)
    starts = StartTimes()
    starts.note(45.0)
    session = GpuSession(None, SessionRequest(text, SamplingSettings(), STREAM), sample_rate=22050, starts=starts)
    request = session.request(_carry_at(1, 0, {1: _made_ahead(400, "stop")}))
    frames = 876
    while math.ceil(45 + frames * 0.034 + 400 * 0.004) > 60:
        frames = math.floor(frames * 0.9)
    fits = math.floor((60 - 45 - 1.6) / 0.034)  # 394: the most frames a 60 s ask covers
    assert request.plan.frames == (0, frames) and 0.9 * fits - 1 <= frames <= fits
    assert request.ask_s == math.ceil(45 + frames * 0.034 + 400 * 0.004) <= 60


def test_no_row_of_a_batched_call_asks_past_its_segments_force_stop():
    text = _paragraph(MAX_TEXT_CHARS)
    s = SamplingSettings(force_stop_frames=30)
    session = GpuSession(None, SessionRequest(text, s, STREAM), sample_rate=22050)
    assert session.request().plan.frames == (30, 30, 30)  # 3 rows (max_rows), each to its force stop
    request = session.request(_carry_at(0, 20, {1: _made_ahead(25), 2: _made_ahead(30, "force_stop")}))
    assert request.plan.frames == (10, 5, 0, 30)  # the one that was force-stopped ahead is only decoded
    # 10 + 0.030 x (5 x rows(3) + 5 x rows(2) + 20 x rows(1)) + 0.004 x (45 + 55 carried)
    assert request.ask_s == math.ceil(10 + 0.030 * (5 * (1 + math.log2(3) / 4) + 5 * 1.25 + 20) + 0.004 * 100)


def _in_process(reference, text, sampling, look_ahead=0):
    """The uninterrupted session, in this process: one segment after another on the engine, or
    with `look_ahead` segments made ahead on a BatchScheduler (the app's and the server's way)."""
    engine, codec = reference
    if not look_ahead:
        session = SynthesisSession(engine, codec, SessionRequest(text, sampling, STREAM))
        return session, session.run()
    scheduler = BatchScheduler(engine, BatchingSettings(max_batch=look_ahead + 1, admission="cap"))
    try:
        session = SynthesisSession(scheduler, codec, SessionRequest(text, sampling, STREAM), look_ahead=look_ahead)
        return session, session.run()
    finally:
        scheduler.close()


class Recording:
    """A runner that keeps every request it passes on (what each call was asked to do)."""

    def __init__(self, runner):
        self.runner, self.requests = runner, []

    def stream(self, request):
        self.requests.append(request)
        return self.runner.stream(request)


# Four segments (one-after-another: 70, 70, 7 and 70 frames; the third one's stop head fires), and
# a budget that gives every segment 30 frames a call (min_call_frames: margin x expected is less).
FOUR = dict(text=_paragraph(1400), sampling=SamplingSettings(seed=11, max_frames=70, stop_threshold=0.3))
SMALL_CALLS = dict(margin=0.01, min_call_frames=30)
CASES = {
    # three text segments, each its own call (one row a call: how every Generate ran before)
    "segments": dict(text=_paragraph(1000), sampling=SamplingSettings(seed=11, max_frames=25, stop_threshold=0.999),
                     budget=GpuBudget(max_rows=1), plans=[(25,), (25,), (25,)]),
    # one sentence that never stops by itself: it outlasts call after call up to its budget
    "runaway": dict(text="Hi there.", sampling=SamplingSettings(seed=12, max_frames=150, stop_threshold=0.999,
                                                                cfg_scale=2.0, cfg_frames=50)),
    # the penalty's window carried from call to call, force-stopped in the last one
    "guarded": dict(text="Hi there.", sampling=SamplingSettings(seed=13, max_frames=400, stop_threshold=0.999,
                                                                repetition_penalty=1.3, repetition_window=40,
                                                                force_stop_frames="auto")),
    # every segment a row of each call: the third ends in the first call and is only decoded later,
    # the others go on from their frames in the next call
    "batched": dict(**FOUR, budget=GpuBudget(**SMALL_CALLS, max_rows=4), look_ahead=3,
                    plans=[(30, 30, 30, 30), (30, 30, 0, 30), (10, 10, 0, 10)]),
    # two rows a call: the third call ends both, and the fourth starts on the third segment
    "batched, two rows": dict(**FOUR, budget=GpuBudget(**SMALL_CALLS, max_rows=2), look_ahead=1,
                              plans=[(30, 30), (30, 30), (10, 10), (30, 30), (30,), (10,)]),
    # 70, 17 (stop), 70 and 42 (stop) frames, 20 a call; a call asks 1 s a frame it makes or decodes,
    # at most 60: the first makes three segments; the next three carry the third one's 20 frames
    # past them (with them the ask would be over 60), and the fourth ends where that segment begins,
    # so the fifth reads them first; the seventh ends the same way where the fourth segment begins
    "batched, cut by the ask": dict(text=FOUR["text"], look_ahead=3,
                                    sampling=SamplingSettings(seed=15, max_frames=70, stop_threshold=0.3),
                                    budget=GpuBudget(margin=0.01, min_call_frames=20, step_s=0.0, codec_s_per_frame=1.0,
                                                     start_s=0.0, max_call_s=60.0),
                                    plans=[(20, 20, 20), (20, 0), (20, 0), (10, 0), (20, 20), (20, 20), (10,), (20,)]),
}


class NoStarts(StartTimes):
    """Cold starts never measured: every call budgets the budget's own start_s."""

    def note(self, seconds):
        pass


@pytest.mark.parametrize("case", list(CASES))
def test_the_calls_make_one_utterance(forked, reference, case):
    c = CASES[case]
    text, sampling = c["text"], c["sampling"]
    direct, want = _in_process(reference, text, sampling)
    runner = Recording(forked)
    starts = NoStarts() if case == "batched, cut by the ask" else forked.starts
    session = GpuSession(
        runner,
        SessionRequest(text, sampling, STREAM),
        sample_rate=22050,
        budget=c.get("budget", GpuBudget()),
        starts=starts,
    )
    got = np.concatenate([chunk.samples for chunk in session])
    st = session.stats
    calls = len(st.gpu_asks_s)
    assert calls >= 3, st.gpu_asks_s
    if "plans" in c:
        assert [r.plan.frames for r in runner.requests] == c["plans"], ([r.plan.frames for r in runner.requests], direct.stats.segment_frames)
    if "look_ahead" in c:  # the same session, uninterrupted, its later segments made ahead in-process
        ahead, ahead_audio = _in_process(reference, text, sampling, c["look_ahead"])
        assert np.array_equal(ahead.codes(), direct.codes()) and np.array_equal(ahead_audio, want)
    assert got.shape == want.shape and np.array_equal(got, want)  # one stream: no seam, nothing twice
    # p_stop to rounding: a resumed segment's first step comes from a longer prefill (facts §3)
    assert st.complete and st.frames == direct.stats.frames and st.p_stop == pytest.approx(direct.stats.p_stop, abs=1e-5)
    assert np.array_equal(session.codes(), direct.codes())  # each segment's frames: its one-after-another ones
    assert st.segment_frames == direct.stats.segment_frames and st.ended_by == direct.stats.ended_by
    # the probe's traces whole, the frames made ahead included
    assert st.entropy == pytest.approx(direct.stats.entropy, abs=1e-4)
    assert st.nll == pytest.approx(direct.stats.nll, abs=1e-4, nan_ok=True) and len(st.nll) == st.frames
    assert isinstance(starts, NoStarts) or starts.estimate() is not None  # a fresh worker said how long its start took
    if case == "guarded":  # auto for two words: int(4 x 1.5 s x 21.53) = 129
        assert st.force_stopped and st.ended_by == ["force_stop"] and st.frames == 129
    if case == "batched":  # what the second call was handed: each later segment's frames made ahead
        assert direct.stats.segment_frames == [70, 70, 7, 70] and direct.stats.ended_by[2] == "stop"
        carry = runner.requests[1].carry
        assert carry.segment == 0 and len(carry.segment_codes) == 30
        assert {j: (len(f.codes), f.ended) for j, f in carry.ahead.items()} == {1: (30, None), 2: (7, "stop"),
                                                                               3: (30, None)}
        starts = np.cumsum([0, *direct.stats.segment_frames])
        for j, f in carry.ahead.items():
            assert np.array_equal(f.codes, direct.codes()[starts[j]:starts[j] + len(f.codes)])
            assert len(f.p_stop) == len(f.codes) + (f.ended == "stop") == len(f.entropy) and len(f.nll) == len(f.codes)
    if case == "batched, cut by the ask":  # a segment made ahead, carried past calls that do not cover it
        assert direct.stats.segment_frames == [70, 17, 70, 42]
        carried = [(r.carry.segment, r.carry.segment_codes is not None, sorted(r.carry.ahead)) for r in runner.requests[1:]]
        assert carried == [(0, True, [1, 2]), (0, True, [1, 2]), (0, True, [1, 2]), (2, False, [2]), (2, True, [3]),
                           (2, True, [3]), (3, False, [3])]


def test_a_segment_ended_ahead_waits_for_the_call_that_covers_it(reference):
    """Plans chosen by hand, through the worker's task one call after another, the carry pickled
    in between. Segments of 70, 17 (stop), 70 and 42 (stop) frames. The first call makes segments
    0 and 1 together: 1 ends (17 frames), 0 stops at its 30. The second covers segment 0 alone: it
    ends there, and the session reaches segment 1, ended ahead but not this call's to decode, so it
    hands over there rather than end it empty. The third decodes it and makes the last two."""
    text, sampling = FOUR["text"], SamplingSettings(seed=15, max_frames=70, stop_threshold=0.3)
    direct, want = _in_process(reference, text, sampling)
    assert direct.stats.segment_frames == [70, 17, 70, 42]
    resident = Resident(*reference)
    carry, audio, handed = None, [], []
    for plan in [CallPlan(0, (30, 30), 0), CallPlan(0, (40,), 0), CallPlan(1, (0, 70, 70), 0)]:
        items = list(
            tasks.stream(resident, tasks.StreamRequest(SessionRequest(text, sampling, STREAM), carry, plan, 0))
        )
        assert not [i for i in items if isinstance(i, tasks.Failure)]
        audio += [i.samples for i in items if isinstance(i, AudioChunk)]
        carried = [i for i in items if isinstance(i, SessionCarry)]
        carry = pickle.loads(pickle.dumps(carried[0])) if carried else None
        handed.append(None if carry is None else (carry.segment, carry.segment_codes is not None,
                                                  {j: (len(f.codes), f.ended) for j, f in carry.ahead.items()}))
    assert handed == [(0, True, {1: (17, "stop")}), (1, False, {1: (17, "stop")}), None]
    assert np.array_equal(np.concatenate(audio), want)
    stats = items[-1]
    assert stats.complete and stats.segment_frames == [70, 17, 70, 42] and stats.ended_by == direct.stats.ended_by


def test_a_carry_survives_pickling_and_another_process(reference):
    text = _paragraph(600)
    sampling = SamplingSettings(seed=5, max_frames=30, stop_threshold=0.999)
    stream = StreamSettings(decode_mode="lookback", lookback_frames=5, first_chunk_frames=3, chunk_frames=7,
                            fade_ms=30.0)
    want = SynthesisSession(*reference, SessionRequest(text, sampling, stream)).run()
    carry, parts = None, []
    while True:
        s = SynthesisSession(
            *reference,
            SessionRequest(text, sampling, stream),
            calls=CallBounds(carry, call_frames=11, one_segment=True),
        )
        parts += [c.samples for c in s]
        if s.carry is None:
            break
        carry = pickle.loads(pickle.dumps(s.carry))
        assert carry.decoding["decoder"]["mode"] == "lookback"
    assert np.array_equal(np.concatenate(parts), want)


def test_a_resumed_segment_draws_the_noise_an_uninterrupted_one_would(reference):
    engine = reference[0]
    s = SamplingSettings(seed=8, max_frames=30, temperature=0.9, stop_threshold=0.999, cfg_scale=2.0, cfg_frames=7)
    whole = torch.stack([st.codes for st in engine.stream_frames(FrameRequest(SENTENCE, s)) if st.codes is not None])
    for n in (1, 7, 19):  # inside and past the guided onset
        rest = list(engine.stream_frames(FrameRequest(SENTENCE, s, resume=whole[:n])))
        assert rest[0].index == n
        assert torch.equal(torch.stack([st.codes for st in rest if st.codes is not None]), whole[n:])
