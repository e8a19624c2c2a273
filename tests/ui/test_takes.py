"""Takes and the re-cut rule, without a browser: the rule's reach, the re-cut's audio against the
session's own, the settings JSON's synth command run for real, the A/B diff."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import numpy as np
import pytest
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)

from gepard_demo.model.guards.stop_rule import derive, recut, recut_limit, stop_step

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs


def test_the_rule_and_how_far_a_recut_reaches():
    p = [0.9, 0.1, 0.3, 0.2, 0.6]  # step 0 always commits; stopped at step 4 (0.6 > its 0.5)
    assert stop_step(p, 0.5) == 4 and stop_step(p, 0.25) == 2 and stop_step(p, 0.7) is None
    assert recut_limit(p, 4, True, 100) == 0.6  # at 0.6 or above it would have run on
    assert recut(p, 4, True, 100, 0.25).frames == 2 and recut(p, 4, True, 100, 0.59).frames == 4
    with pytest.raises(ValueError, match="stop_threshold 0.6 needs the take to have run on.*below 0.600"):
        recut(p, 4, True, 100, 0.6)
    # A run to its budget tells every threshold; one stopped by the user only those a step exceeds.
    budget = [0.9, 0.1, 0.2, 0.15]
    assert recut_limit(budget, 4, False, 4) is None
    r = recut(budget, 4, False, 4, 0.95)
    assert r.frames == 4 and r.runaway and not r.stop_fired
    assert recut_limit(budget, 4, False, 10) == 0.2
    with pytest.raises(ValueError):
        recut(budget, 4, False, 10, 0.2)
    # A force-stopped run tells every threshold too (the force stop does not depend on it).
    assert recut_limit(budget, 4, False, 10, force_stop=4) is None
    r = recut(budget, 4, False, 10, 0.95, force_stop=4)
    assert (r.frames, r.runaway, r.ended_by) == (4, True, "force_stop")
    assert recut(budget, 4, False, 10, 0.15, force_stop=4).frames == 2  # step 2 (0.2) is the first above 0.15
    # The same rule as eval's one-pass sweep.
    assert derive(p, 4, 0.5, 0.25, 100) == recut(p, 4, True, 100, 0.25)


@pytest.fixture(scope="module")
def take(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.ui.takes import Take

    sampling = SamplingSettings(seed=5, max_frames=48, stop_threshold=0.99, temperature=0.7)
    stream = StreamSettings(first_chunk_frames=7, chunk_frames=9, fade_ms=20, silence_ms=50)
    session = SynthesisSession(tiny_engine, tiny_codec, SessionRequest("A take to cut shorter.", sampling, stream))
    session.run()
    return Take(1, session.text, {"text": session.text, "seed": 5}, session.sampling, stream,
                session.stats.as_dict(), session.codes(), None, "tiny"), session


def test_a_recut_at_the_takes_own_threshold_is_its_audio(take, tiny_codec):  # noqa: F811
    from gepard_demo.ui.takes import recut_take

    t, session = take
    audio, d = recut_take(t, 0.99, tiny_codec)  # the same threshold: the whole take again
    assert d.frames == session.stats.frames
    assert len(audio) == len(session.audio()) and np.max(np.abs(audio - session.audio())) <= 1e-5


@pytest.mark.parametrize("mode", ["exact", "lookback"])
def test_a_long_texts_take_is_recut_segment_by_segment(tiny_engine, tiny_codec, mode):  # noqa: F811
    # Each segment is its own request with its own stop: re-cut at a lower threshold, each stops
    # where its own p_stop says, and the whole equals a direct run at that threshold (same seed).
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.ui.takes import Take, recut_take

    text = " ".join(", ".join([s] * 11) + "." for s in ("A first part of a long take", "And then a second part of it"))
    sampling = SamplingSettings(seed=9, max_frames=40, stop_threshold=0.99, temperature=0.7)
    stream = StreamSettings(first_chunk_frames=7, chunk_frames=9, fade_ms=20, decode_mode=mode, lookback_frames=4)
    session = SynthesisSession(tiny_engine, tiny_codec, SessionRequest(text, sampling, stream))
    session.run()
    st = session.stats.as_dict()
    assert st["segments"] == 2 and st["segment_frames"] == [40, 40]
    t = Take(1, session.text, {}, session.sampling, stream, st, session.codes(), None, "tiny")
    assert t.recut_refusal() is None and t.recut_limit() is None  # both ran to their budget: every threshold
    first, second = st["p_stop"][:40], st["p_stop"][40:]
    low = round(min(max(first[1:35]), max(second[1:35])) - 0.005, 3)  # both segments stop before frame 35
    audio, d = recut_take(t, low, tiny_codec)
    direct = SynthesisSession(
        tiny_engine, tiny_codec, SessionRequest(text, sampling.replace(stop_threshold=low), stream)
    )
    direct.run()
    assert direct.stats.ended_by == ["stop", "stop"] and d.stop_fired
    assert d.frames == direct.stats.frames < 80
    assert len(audio) == len(direct.audio()) and np.max(np.abs(audio - direct.audio())) <= 1e-5


def test_a_recut_keeps_the_takes_breaks_exact(tiny_engine, tiny_codec):  # noqa: F811
    # A <break> between the parts: the re-cut at a lower threshold is the direct run at it, the
    # break's 0.5 s of zeros where the first part's kept frames now end.
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.ui.takes import Take, recut_take

    text = '<break time="500ms"/> '.join(", ".join([s] * 11) + ". " for s in ("A first part of a take", "And a second"))
    sampling = SamplingSettings(seed=9, max_frames=40, stop_threshold=0.99, temperature=0.7)
    stream = StreamSettings(first_chunk_frames=7, chunk_frames=9, fade_ms=20)
    session = SynthesisSession(tiny_engine, tiny_codec, SessionRequest(text, sampling, stream))
    session.run()
    st = session.stats.as_dict()
    assert st["segment_frames"] == [40, 40] and st["segment_pauses"] == [11025, 0]
    t = Take(1, session.text, {}, session.sampling, stream, st, session.codes(), None, "tiny")
    same, _ = recut_take(t, 0.99, tiny_codec)
    assert len(same) == len(session.audio()) and np.max(np.abs(same - session.audio())) <= 1e-5
    first, second = st["p_stop"][:40], st["p_stop"][40:]
    low = round(min(max(first[1:35]), max(second[1:35])) - 0.005, 3)
    audio, d = recut_take(t, low, tiny_codec)
    direct = SynthesisSession(tiny_engine, tiny_codec, SessionRequest(text, sampling.replace(stop_threshold=low), stream))
    direct.run()
    assert direct.stats.ended_by == ["stop", "stop"] and d.frames == direct.stats.frames < 80
    assert len(audio) == len(direct.audio()) and np.max(np.abs(audio - direct.audio())) <= 1e-5
    cut = direct.stats.segment_frames[0] * tiny_codec.samples_per_frame
    assert not audio[cut:cut + 11025].any() and audio[cut - 200:cut].any()


def test_a_recut_matches_a_direct_run_at_the_lower_threshold(take, tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.ui.takes import recut_take

    t, _ = take
    p = t.p_stop
    low = round(float(np.floor(max(p[1:30]) * 100) / 100 - 0.01), 2)
    audio, d = recut_take(t, low, tiny_codec)
    direct = SynthesisSession(
        tiny_engine, tiny_codec, SessionRequest(t.text, t.sampling.replace(stop_threshold=low), t.stream)
    )
    direct.run()
    assert d.stop_fired and direct.stats.stop_frame == d.stop_frame < 30
    assert len(audio) == len(direct.audio()) and np.max(np.abs(audio - direct.audio())) <= 1e-5


@pytest.mark.slow
def test_settings_json_makes_the_take_again_with_synth(take, tmp_path):
    from gepard_demo.ui.takes import settings_json

    t, session = take
    doc = json.loads(settings_json(t))
    assert doc["seed"] == 5 and doc["stream"]["chunk_frames"] == 9 and len(doc["p_stop"]) == len(t.p_stop)
    args = shlex.split(doc["synth"])
    assert args[:4] == ["python", "-m", "gepard_demo", "synth"] and args[4] == t.text
    out = tmp_path / "again.wav"
    args[-1] = str(out)
    res = subprocess.run([sys.executable, *args[1:]], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    stats = json.loads(res.stdout.strip().splitlines()[-1])
    assert stats["frames"] == session.stats.frames and stats["seed"] == 5


def test_the_ab_diff_marks_what_differs(take):
    import dataclasses

    from gepard_demo.ui.takes import add_take, diff_markdown, find, next_number, table_rows

    a, _ = take
    b = dataclasses.replace(a, number=2, sampling=a.sampling.replace(temperature=1.1))
    md = diff_markdown(a, b)
    assert "| temperature ◀ | 0.7 | 1.1 | +0.4 |" in md and "| seed |" in md
    # the label: each tagged setting in short (settings.py's tag=), a switch only when on
    assert b.label.startswith(f"#2 · T 1.1 · k {a.sampling.top_k} · S {a.sampling.stop_threshold:g} · seed {a.sampling.seed} · ")
    assert " · greedy · " in dataclasses.replace(b, sampling=b.sampling.replace(greedy=True)).label
    takes = []
    for _ in range(12):
        takes = add_take(takes, dataclasses.replace(a, number=next_number(takes)))
    assert [x.number for x in takes] == list(range(12, 2, -1))  # newest first, the last 10
    assert find(takes, takes[3].label) is takes[3] and len(table_rows(takes)) == 10


def test_what_cannot_be_recut_says_why(take):
    import dataclasses

    from gepard_demo.ui.page.take_panel import reach_words

    a, _ = take
    served = dataclasses.replace(a, codes=None)  # a served model sends audio only
    assert "frames were not kept" in reach_words(served, 0.3)
    # A long text stopped before its last segment: two segments, one of them made.
    split = dataclasses.replace(a, stats={**a.stats, "segments": 2, "segment_frames": [a.stats["frames"]]})
    assert "stopped before its last segment" in reach_words(split, 0.3)
    limit = a.recut_limit()  # this take ran to its budget at 0.99 unless its stop fired
    words = reach_words(a, 0.98)
    assert ("every threshold" in words) if limit is None else (f"{limit:.3f}" in words)


def test_a_cloned_take_downloads_with_its_reference_clip(take, tmp_path):
    import dataclasses
    from types import SimpleNamespace

    from gepard_demo.ui.page.take_panel import TakeHandlers
    from gepard_demo.ui.takes import synth_command

    a, _ = take
    clip = tmp_path / "my-voice.wav"
    clip.write_bytes(b"RIFF")
    cloned = dataclasses.replace(a, controls={**a.controls, "ref_audio": str(clip)})
    assert "--ref-audio my-voice.wav" in synth_command(cloned)
    files = TakeHandlers(None, SimpleNamespace(wav_dir=tmp_path / "wavs", captions=None))._files(cloned)
    assert files[-1] == str(clip) and files[0].endswith(".json")  # no WAV: this take kept none
    assert files[1].endswith(".codes.npy") and np.array_equal(np.load(files[1]), a.codes)  # its frames


def test_a_take_keeps_what_was_written_and_what_was_read(take, tiny_codec):  # noqa: F811
    """The takes table shows the written text first, then what the model read where they differ."""
    import dataclasses

    from gepard_demo.text.front_end import spoken_for
    from gepard_demo.ui.takes import table_rows

    t, _ = take
    read = spoken_for("It is $5.", "rules")
    assert read == "It is five dollars."
    normalized = dataclasses.replace(t, text="It is $5.", spoken=read)
    assert table_rows([normalized])[0][1] == "It is $5. → It is five dollars."
    assert table_rows([dataclasses.replace(normalized, spoken="It is $5.")])[0][1] == "It is $5."
    assert table_rows([t])[0][1] == t.text  # a take from before it kept what was read
