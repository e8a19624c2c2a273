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

from gepard_demo.codec import load_codec
from gepard_demo.model.engine import GepardEngine
from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.text_input import MAX_TEXT_CHARS, split_text
from gepard_demo.zerogpu.budget import GpuBudget, StartTimes, expected_speech_s
from gepard_demo.zerogpu.forked import Forked
from gepard_demo.zerogpu.resident import Resident
from gepard_demo.zerogpu.session import GpuSession

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

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
    assert frames == int(np.ceil(b.margin * expected_speech_s(SENTENCE) * 21.5))  # 1.5 x (0.7 + 0.4 x 12 words)
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
        session = GpuSession(None, segment, s, STREAM, sample_rate=22050, starts=starts)
        assert len(session.segments) == 1 and 60 <= words
        request = session.request()
        assert request.ask_s == math.ceil(start + request.call_frames * per_frame - 1e-9), start
        asks.append(request.ask_s)
        if start + wanted * per_frame <= 60:
            assert request.call_frames == wanted, start
            continue
        capped += 1
        fits = math.floor((60 - start) / per_frame + 1e-9)  # the most frames a 60 s ask covers
        assert 0.9 * fits - 1 <= request.call_frames <= fits, (start, request.call_frames, fits)
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


def _in_process(reference, text, sampling):
    session = SynthesisSession(*reference, text, sampling, STREAM)
    return session, session.run()


@pytest.mark.parametrize("case", ["segments", "runaway", "guarded"])
def test_the_calls_make_one_utterance(forked, reference, case):
    if case == "segments":  # three text segments, each its own call
        text = _paragraph(1000)
        sampling = SamplingSettings(seed=11, max_frames=25, stop_threshold=0.999)
    elif case == "guarded":  # the penalty's window carried from call to call, force-stopped in the last one
        text, sampling = "Hi there.", SamplingSettings(seed=13, max_frames=400, stop_threshold=0.999,
                                                       repetition_penalty=1.3, repetition_window=40,
                                                       force_stop_frames="auto")
    else:  # one sentence that never stops by itself: it outlasts call after call up to its budget
        text, sampling = "Hi there.", SamplingSettings(seed=12, max_frames=150, stop_threshold=0.999, cfg_scale=2.0,
                                                       cfg_frames=50)
    direct, want = _in_process(reference, text, sampling)
    session = GpuSession(forked, text, sampling, STREAM, sample_rate=22050, budget=GpuBudget(), starts=forked.starts)
    got = np.concatenate([c.samples for c in session])
    st = session.stats
    calls = len(st.gpu_asks_s)
    assert calls >= 3, st.gpu_asks_s
    assert got.shape == want.shape and np.array_equal(got, want)  # one stream: no seam, nothing twice
    # p_stop to rounding: a resumed segment's first step comes from a longer prefill (facts §3)
    assert st.complete and st.frames == direct.stats.frames and st.p_stop == pytest.approx(direct.stats.p_stop, abs=1e-5)
    assert np.array_equal(session.codes(), direct.codes())
    assert forked.starts.estimate() is not None  # a fresh worker said how long its start took
    if case == "guarded":  # auto for two words: int(4 x 1.5 s x 21.53) = 129; the probe's traces carried too
        assert st.force_stopped and st.ended_by == ["force_stop"] and st.frames == 129
        assert st.entropy == pytest.approx(direct.stats.entropy, abs=1e-4) and len(st.nll) == 129


def test_a_carry_survives_pickling_and_another_process(reference):
    text = _paragraph(600)
    sampling = SamplingSettings(seed=5, max_frames=30, stop_threshold=0.999)
    stream = StreamSettings(decode_mode="lookback", lookback_frames=5, first_chunk_frames=3, chunk_frames=7,
                            fade_ms=30.0)
    want = SynthesisSession(*reference, text, sampling, stream).run()
    carry, parts = None, []
    while True:
        s = SynthesisSession(*reference, text, sampling, stream, resume=carry, call_frames=11, one_segment=True)
        parts += [c.samples for c in s]
        if s.carry is None:
            break
        carry = pickle.loads(pickle.dumps(s.carry))
        assert carry.decoding["decoder"]["mode"] == "lookback"
    assert np.array_equal(np.concatenate(parts), want)


def test_a_resumed_segment_draws_the_noise_an_uninterrupted_one_would(reference):
    engine = reference[0]
    s = SamplingSettings(seed=8, max_frames=30, temperature=0.9, stop_threshold=0.999, cfg_scale=2.0, cfg_frames=7)
    whole = torch.stack([st.codes for st in engine.stream_frames(SENTENCE, s) if st.codes is not None])
    for n in (1, 7, 19):  # inside and past the guided onset
        rest = list(engine.stream_frames(SENTENCE, s, resume=whole[:n]))
        assert rest[0].index == n
        assert torch.equal(torch.stack([st.codes for st in rest if st.codes is not None]), whole[n:])
