"""Text written as it comes (the page's "as written" mode, streaming/text_feed.py): its units are
the speech WebSocket's, cut by the splitter as the words arrive; a session made with words_per_s
speaks each unit as its segment, with the seed segment k of a long text takes, so each sentence
alone (a REST request of its text and that seed) gives the same frames; a unit starts no sooner
than its text is there; Stop while the text is still being written ends the session."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)

from gepard_demo.batching.scheduler import BatchScheduler
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.segments import segment_seed
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.text_feed import pieces, write
from gepard_demo.streaming.text_splitter import TextSplitter

TEXT = "Dr. Smith came at 3.14 p.m. today. Was it late? \"Yes,\" she said... Then it ended"
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)


def _sampling() -> SamplingSettings:
    return SamplingSettings(seed=33, temperature=0.8, max_frames=16, stop_threshold=0.999)


def test_the_units_are_the_websockets_cut_as_the_words_come():
    whole = TextSplitter("sentence")
    at_once = whole.feed(TEXT) + whole.flush()
    w = write(TEXT, words_per_s=4)
    assert list(w.units) == at_once == ["Dr. Smith came at 3.14 p.m. today.", "Was it late?",
                                        "\"Yes,\" she said...", "Then it ended"]
    words = pieces(TEXT)
    assert "".join(words) == TEXT and len(words) == 16
    # A unit is let go when the next word's space comes: one word after its last word.
    assert w.written_s[:3] == (6 / 4, 9 / 4, 12 / 4) and w.closed_s[:3] == (7 / 4, 10 / 4, 13 / 4)
    # The last one at the flush, right after its last word.
    assert w.written_s[3] == w.closed_s[3] == 15 / 4
    with pytest.raises(ValueError, match="words_per_s"):
        write(TEXT, 0)


@pytest.mark.parametrize("look_ahead", [0, 2])
def test_each_sentence_is_its_own_segment_with_its_segment_seed(tiny_engine, tiny_codec, look_ahead):  # noqa: F811
    scheduler = BatchScheduler(tiny_engine, BatchingSettings(max_batch=4, admission="cap")) if look_ahead else None
    try:
        session = SynthesisSession(
            scheduler or tiny_engine,
            tiny_codec,
            SessionRequest(TEXT, _sampling(), STREAM, words_per_s=10),
            look_ahead=look_ahead,
        )
        t0 = time.perf_counter()
        made: dict[int, float] = {}  # segment -> when the page's progress first showed it generated
        runner = threading.Thread(target=session.run, daemon=True)
        runner.start()
        while runner.is_alive():
            for k, done in enumerate(session.progress()["generated"]):
                if done:
                    made.setdefault(k, time.perf_counter())
            time.sleep(0.005)
        # No sentence is made before the splitter has let its text go (not even ahead of its turn).
        closed = session.writing.written.closed_s
        assert all(at >= session.writing.t0 + closed[k] for k, at in made.items()), (made, session.writing.t0, closed)
        assert session.segments == list(write(TEXT, 10).units) and session.stats.segments == 4
        assert session.stats.complete and len(session.stats.segment_frames) == 4
        # Where each sentence ends in the audio (the page's line finds the one playing from it).
        assert session.progress()["ends_s"] == [f * 1024 / 22050 for f in np.cumsum(session.stats.segment_frames)]
        # Each sentence's wait is counted, from its last word: at least the word until it is let go.
        waits = session.stats.text_waits_s
        assert len(waits) == 4 and all(w >= c - s - 0.002 for w, s, c in
                                       zip(waits, session.writing.written.written_s, session.writing.written.closed_s))
        assert time.perf_counter() - t0 >= session.writing.written.closed_s[-1]  # it waited for the text
        # Sentence k alone, with segment k's seed, makes the same frames (what REST gives for it).
        codes, at = session.codes(), 0
        for k, (unit, n) in enumerate(zip(session.segments, session.stats.segment_frames)):
            alone = SynthesisSession(
                tiny_engine, tiny_codec, SessionRequest(unit, _sampling().replace(seed=segment_seed(33, k)), STREAM)
            )
            alone.run()
            assert np.array_equal(alone.codes(), codes[at:at + n]), k
            at += n
    finally:
        if scheduler is not None:
            scheduler.close()


def test_stop_while_the_text_is_being_written_ends_the_session(tiny_engine, tiny_codec):  # noqa: F811
    text = "Hello there. And then a much longer second sentence comes, still being written when Stop comes."
    session = SynthesisSession(
        tiny_engine, tiny_codec, SessionRequest(text, _sampling(), STREAM, words_per_s=2)
    )  # 8 s to write
    ended = threading.Event()

    def run():
        session.run()
        ended.set()

    threading.Thread(target=run, daemon=True).start()
    deadline = time.monotonic() + 60
    while not session.stats.text_waits_s and time.monotonic() < deadline:  # the first sentence spoken
        time.sleep(0.01)
    assert session.stats.text_waits_s, "the first sentence never came"
    session.cancel()
    assert ended.wait(10), "Stop while waiting for the text did not end the session"  # a hang guard
    assert session.stats.cancelled and len(session.stats.segment_frames) == 1
