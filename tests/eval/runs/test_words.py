"""Every eval error placed in time: a scored row's word alignment (eval/runs/words.py), the failure
table's "where" (eval/report/where.py), the Eval tab's coloured words and compare's word diffs.

The real path runs on Piper speech made into failures whose place is known: a phrase said twice
(a loop), the audio cut after the first piece (a truncation), a long silence put between two
words (a pause); scored with the real Whisper tiny.en."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import soundfile as sf
from tests.support.alignment_fixtures import RATE, spoken
from tests.support.eval_fixtures import fake_run

from eval.jsonio import append_jsonl, write_json_atomic
from eval.scoring.word_alignment import timed_ops

# Said three times, once in the text: two extra copies (eval/scoring/loops.py's transcript rule: 2+ extra).
LOOP = ["The quick brown fox", "jumps over the lazy dog", "jumps over the lazy dog", "jumps over the lazy dog",
        "and then it runs into the park."]
CUT = ["The quick brown fox jumps", "over the lazy dog and then it runs into the park."]
PAUSE = ["Please call Smith before nine", "on Monday morning."]
SLACK_S = 0.25  # "where" prints tenths of a second, and a 150 ms pause between copies is at the edge of what Silero splits


def test_each_op_takes_the_heard_words_time_and_a_deletion_the_gap_where_it_belongs():
    heard = [(0.0, 1.0), (1.5, 2.0), (3.0, 4.0), (4.2, 4.4), (4.5, 5.0)]  # a, x, d, e, f
    assert timed_ops("a b c d e", "a x d e f", heard, 6.0) == [  # 3 edits, the only alignment with so few
        {"op": "ok", "ref": "a", "hyp": "a", "s": 0.0, "e": 1.0},
        {"op": "sub", "ref": "b", "hyp": "x", "s": 1.5, "e": 2.0},
        {"op": "del", "ref": "c", "hyp": None, "s": 2.0, "e": 3.0},  # between "x" (ends 2.0) and "d" (starts 3.0)
        {"op": "ok", "ref": "d", "hyp": "d", "s": 3.0, "e": 4.0},
        {"op": "ok", "ref": "e", "hyp": "e", "s": 4.2, "e": 4.4},
        {"op": "ins", "ref": None, "hyp": "f", "s": 4.5, "e": 5.0},
    ]
    # Lost at the end: from the last heard word to the audio's end.
    assert timed_ops("a b c", "a", [(0.5, 1.0)], 3.0)[1:] == [
        {"op": "del", "ref": "b", "hyp": None, "s": 1.0, "e": 3.0}, {"op": "del", "ref": "c", "hyp": None, "s": 1.0, "e": 3.0}]


@pytest.fixture(scope="module")
def scored_run(tmp_path_factory):
    """A run folder of three Piper utterances, scored (faster-whisper tiny.en), measured, reported."""
    from eval.report.markdown import make_report
    from eval.runs.measure import measure
    from eval.runs.score import score
    from eval.scoring.asr import ASRSettings

    run = tmp_path_factory.mktemp("words") / "run"
    (run / "wav").mkdir(parents=True)
    write_json_atomic(run / "config.json", {"version": 1, "run": {"engine": "piper", "model": "joe", "set": "hand"},
                                            "set_sha256": "x", "items": 3})
    loop, cut, pause = spoken(LOOP, [0.15] * 4), spoken(CUT, [0.3]), spoken(PAUSE, [1.6])
    cut_at = int((cut.edges[0][1] + 0.05) * RATE)
    cases = {"loop": (" ".join([LOOP[0], LOOP[1], LOOP[4]]), loop.audio), "cut": (cut.text, cut.audio[:cut_at]),
             "pause": (pause.text, pause.audio)}
    for uid, (text, audio) in cases.items():
        sf.write(run / "wav" / f"{uid}.wav", audio, RATE, subtype="PCM_16")
        append_jsonl(run / "rows.jsonl", {
            "id": uid, "category": "c", "text": text, "words": len(text.split()), "frames": None, "stop_fired": None,
            "stop_frame": None, "runaway": None, "duration_s": len(audio) / RATE, "p_stop": None, "ttfa_s": 0.1,
            "rtf": 0.5, "seed": None, "wav": f"wav/{uid}.wav", "settings": {}, "sample_rate": RATE})
    cache = tmp_path_factory.mktemp("whisper-cache")
    tag = score(run, ASRSettings(backend="faster-whisper", model="tiny.en"), cache=cache, log=lambda m: None)
    measure(run, dnsmos="off", log=lambda m: None)
    report = make_report(run, tag)
    words = {r["id"]: r for r in map(json.loads, (run / "asr" / tag / "words.jsonl").read_text().splitlines())}
    return run, words, json.loads((run / "summary.json").read_text()), report.read_text(), (loop, cut, pause)


def test_a_loop_is_placed_over_the_repeated_copy(scored_run):
    run, words, summary, report, (loop, _, _) = scored_run
    ins = [o for o in words["loop"]["ops"] if o["op"] == "ins"]
    assert [o["hyp"] for o in ins] == "jumps over the lazy dog".split() * 2
    line = summary["overall"]["where"]["loop"]["loop"]
    s, e = map(float, re.match(r'a loop from ([\d.]+) to ([\d.]+) s over "jumps over the lazy dog jumps over the ..."',
                               line).groups())
    # Two of the three copies are the extra ones (the text says it once): which two, the edit
    # alignment decides; their start and end are where those copies' samples were put.
    spans = [(loop.edges[1][0], loop.edges[2][1]), (loop.edges[2][0], loop.edges[3][1])]
    assert any(abs(s - a) <= SLACK_S and abs(e - b) <= SLACK_S for a, b in spans), (line, spans)
    assert f"- loop, [loop](wav/loop.wav): {line}" in report


def test_the_words_a_truncation_lost_start_where_the_audio_stopped_saying_them(scored_run):
    _, words, summary, _, (_, cut, _) = scored_run
    lost = "over the lazy dog and then it runs into the park".split()
    assert [o["ref"] for o in words["cut"]["ops"] if o["op"] == "del"] == lost
    line = summary["overall"]["where"]["truncated"]["cut"]
    t = float(re.match(r'the words lost after ([\d.]+) s: "over the lazy dog and then it runs ..."', line).group(1))
    assert abs(t - cut.edges[0][1]) <= SLACK_S, (line, cut.edges[0][1])


def test_a_long_pause_is_placed_between_the_two_words_it_falls_between(scored_run):
    _, _, summary, _, (_, _, pause) = scored_run
    line = summary["overall"]["where"]["long_pause"]["pause"]
    m = re.match(r'a ([\d.]+) s pause between "9" and "on" \(([\d.]+)-([\d.]+) s\)', line)  # normalized: nine -> 9
    assert m, line
    gap, a, b = map(float, m.groups())
    assert abs(a - pause.edges[0][1]) <= SLACK_S and abs(b - pause.edges[1][0]) <= SLACK_S
    assert abs(gap - 1.6) <= SLACK_S and abs(gap - (b - a)) <= 0.1  # the silence put there, from "9"'s end to "on"'s start


def test_the_eval_tab_colours_a_rows_words_each_with_its_moment(scored_run):
    from eval.ui.word_view import row_words

    run, words, _, _, _ = scored_run
    html = row_words(run, "loop")
    assert "data-audio-from='#eval-failed-audio'" in html
    spans = re.findall(r"<span class='gepard-w' data-op='(\w+)'(?: data-seek='([\d.]+)')?", html.split("</div>")[0])
    ops = words["loop"]["ops"]
    assert [op for op, _ in spans] == [o["op"] for o in ops]
    assert [float(t) if t else None for _, t in spans] == [o["s"] for o in ops]


def test_compare_shows_base_and_new_words_of_each_regression(tmp_path):
    from eval.compare.folder import compare_into
    from eval.runs.words import align_words

    texts = ["the cat sat on the mat", "a bird in the hand"]
    base = fake_run(tmp_path / "base", texts, texts, wavs=True)
    new = fake_run(tmp_path / "new", texts, ["the cat sat on the mat", "a bird bird bird in the"], wavs=True)
    for run in (base, new):
        align_words(run, "faster-whisper_tiny.en_int8", log=lambda m: None)  # silent WAVs: ops, no times
    compare_into(tmp_path / "cmp", base, [new])
    md = (tmp_path / "cmp" / "compare.md").read_text()
    # The fake WAVs are 0.1 s of silence: nothing heard is placed, and the lost "hand" belongs
    # between the last heard word (none placed: 0 s) and the audio's end (0.1 s).
    assert "- **u001**\n  - base: a bird in the hand\n  - new: a bird [+bird bird] in the [−hand @0.0–0.1 s]" in md
