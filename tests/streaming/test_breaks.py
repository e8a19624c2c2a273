"""Pauses written into the text (streaming/breaks.py): `<break time="500ms"/>` becomes exact
silence of that length between the parts around it, on the tiny model: the audio is the same
text's audio without the break, cut where the first part's frames end, with exactly that many zero
samples between; the stats, the segment ends and the word spans shift by it; a bad break is a
TextError naming `input`, and any other tag is read as text."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)

from gepard_demo.serving.timestamps import segment_bounds
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.breaks import split_breaks
from gepard_demo.streaming.plan import plan
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.text_feed import pieces
from gepard_demo.streaming.text_input import TextError

STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)
SAMPLING = SamplingSettings(seed=5, temperature=0.8, max_frames=20, stop_threshold=0.999)
FIRST, SECOND = "The first part is said here.", "Then the second part follows it."


def _run(engine, codec, text):
    # segment_chars below the whole text: the text without a break is cut where the break stands.
    session = SynthesisSession(engine, codec, SessionRequest(text, SAMPLING, STREAM), segment_chars=len(SECOND) + 2)
    return session, session.run()


@pytest.mark.parametrize("tag, samples", [('<break time="500ms"/>', 11025), ("<break time='1.5s'/>", 33075)])
def test_a_break_is_exact_silence_between_the_parts(tiny_engine, tiny_codec, tag, samples):
    plain, plain_audio = _run(tiny_engine, tiny_codec, f"{FIRST} {SECOND}")
    broken, audio = _run(tiny_engine, tiny_codec, f"{FIRST} {tag} {SECOND}")
    assert plain.segments == broken.segments == [FIRST, SECOND]
    cut = plain.stats.segment_frames[0] * tiny_codec.samples_per_frame
    assert len(audio) == len(plain_audio) + samples
    assert np.array_equal(audio[:cut], plain_audio[:cut])
    assert not audio[cut:cut + samples].any()
    assert np.array_equal(audio[cut + samples:], plain_audio[cut:])
    st = broken.stats
    assert st.segment_pauses == [samples, 0] and st.frames == plain.stats.frames
    assert st.audio_s == pytest.approx(plain.stats.audio_s + samples / 22050)
    rate = tiny_codec.sample_rate
    assert broken.progress()["ends_s"][1] == pytest.approx(plain.progress()["ends_s"][1] + samples / rate)
    # The second part's words are aligned on its own audio, after the silence.
    bounds = segment_bounds(st.segment_frames, tiny_codec.samples_per_frame, len(audio), st.segment_pauses)
    assert bounds == [(0, cut), (cut + samples, len(audio))]
    assert broken.text == f"{FIRST} {SECOND}"  # the words; the tag is not read


def test_breaks_are_bounded_and_named(tiny_engine):
    for text, why in [(f'{FIRST} <break time="6s"/> {SECOND}', "at most 5 s"),
                      (f'{FIRST} <break time="soon"/> {SECOND}', "not a break"),
                      (f"{FIRST} <break/> {SECOND}", "not a break"),
                      (f'{FIRST} <break time="0ms"/> {SECOND}', "more than 0"),
                      (f'{FIRST} <break time="1s"', "not a break"),  # the text ends inside the tag
                      (f'<break time="1s"/> {FIRST}', "before any words"),
                      (f'{FIRST} <break time="1s"/>', "ends with a break"),
                      (" ".join([FIRST] + ['<break time="5s"/> x'] * 7), "add up to 35 s")]:
        with pytest.raises(TextError, match=why) as err:
            plan(text, SAMPLING)
        assert str(err.value).startswith("input:")
    for text, why in [(f'<break time="1s"/> {FIRST}', "before any words"), (f'{FIRST} <break time="1s"/>', "ends with"),
                      (f'{FIRST} <break time="1 minute"/> {SECOND}', "not a break"), (f'{FIRST} <break time="7s"/> x', "at most 5"),
                      (f'{FIRST} <break time="1s" {SECOND}', "not a break")]:
        with pytest.raises(TextError, match=why) as err:  # written as it comes: the same refusals
            plan(text, SAMPLING, words_per_s=5.0)
        assert str(err.value).startswith("input:")


def test_a_break_in_text_written_as_it_comes_is_its_exact_silence(tiny_engine, tiny_codec):
    """The text written word by word (text_feed.pieces cuts the tag in two: `<break` and
    ` time="1.5s"/>`): the same units and frames as without the break, exactly its zeros between;
    a break inside a sentence cuts it there."""
    def written(text):
        request = SessionRequest(text, SAMPLING, STREAM, words_per_s=500.0)
        session = SynthesisSession(tiny_engine, tiny_codec, request)
        return session, session.run()

    tag, samples = '<break time="1.5s"/>', 33075
    assert pieces(tag) == ["<break", ' time="1.5s"/>']
    plain, plain_audio = written(f"{FIRST} {SECOND}")
    broken, audio = written(f"{FIRST} {tag} {SECOND}")
    assert plain.segments == broken.segments == [FIRST, SECOND] and broken.pauses == (1.5, 0.0)
    cut = plain.stats.segment_frames[0] * tiny_codec.samples_per_frame
    assert len(audio) == len(plain_audio) + samples
    assert np.array_equal(audio[:cut], plain_audio[:cut]) and not audio[cut:cut + samples].any()
    assert np.array_equal(audio[cut + samples:], plain_audio[cut:])
    assert broken.stats.segment_pauses == [samples, 0] and broken.text == f"{FIRST} {SECOND}"
    inner = plan('One two <break time="250ms"/> three. Four.', SAMPLING, words_per_s=5.0)
    assert inner.segments == ["One two", "three.", "Four."] and inner.pauses == (0.25, 0.0, 0.0)


def test_other_tags_are_read_as_text_and_breaks_add_up():
    assert [(p.text, p.pause_s) for p in split_breaks("Eat <b>now</b> at <breakfast/>.")] == \
        [("Eat <b>now</b> at <breakfast/>.", 0.0)]
    parts = split_breaks('One. <break time="1s"/><break time=".25s"/> Two. <break time="250ms" /> Three.')
    assert [(p.text, p.pause_s) for p in parts] == [("One.", 1.25), ("Two.", 0.25), ("Three.", 0.0)]
    assert plan('One. <break time="1s"/> Two.', SAMPLING).pauses == (1.0, 0.0)


def test_the_speech_server_reads_a_break_and_refuses_a_bad_one_naming_input(tiny_engine, tiny_codec):
    """On the REST surface: the answer holds the break's silence (a run of exactly-zero samples at
    least the break long, where the plain text's answer has none); a bad break is a 400 naming input."""
    import httpx
    from tests.support.app_fixtures import serve_in_thread

    from gepard_demo.serving.server import build_speech_app

    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling().replace(stop_threshold=0.99), STREAM)

    def longest_zero_run(pcm: bytes) -> int:
        z = np.concatenate([[0], (np.frombuffer(pcm, "<i2") == 0).astype(np.int8), [0]])
        edges = np.flatnonzero(np.diff(z))
        return int((edges[1::2] - edges[::2]).max()) if len(edges) else 0

    with serve_in_thread(app, "speech-server-breaks") as port, \
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
        def speak(text):
            return client.post("/v1/audio/speech", json={"input": text, "max_new_tokens": 16, "seed": 5,
                                                         "response_format": "pcm"})

        plain, broken = speak(f"{FIRST} {SECOND}"), speak(f'{FIRST} <break time="1.5s"/> {SECOND}')
        assert plain.status_code == broken.status_code == 200, broken.text
        assert longest_zero_run(plain.content) < 11025 <= 33075 <= longest_zero_run(broken.content)
        for bad in ('<break time="9s"/>', '<break time="1 minute"/>'):
            r = speak(f"{FIRST} {bad} {SECOND}")
            assert r.status_code == 400 and r.json()["error"]["param"] == "input", r.text
