"""Errors in time on a normalised run (issue 65): where the model read "five dollars fifty cents"
for the text's "$5.50", the row's words (eval/runs/words.py) time the heard "$5.50" over the span
of the spoken words it became, and the Eval tab shows the written token there with what was read.

The run folder is eval_fixtures.fake_run's (its transcripts given, scored with the real normaliser
and metrics), its config made with text_normalization "rules". The aligner is a stand-in that
knows when each spoken word was said and times the words it is given one by one over them, as a
forced aligner lays a text it is given over the audio: given the transcript's "$5.50" it could only
put it over "five". The real aligner on Piper's speech of the reading is the last test."""

from __future__ import annotations

import re

import numpy as np
import pytest
import soundfile as sf
from tests.support.alignment_fixtures import RATE, aligner, spoken  # noqa: F401  (aligner: fixture)
from tests.support.eval_fixtures import fake_run

from eval.jsonio import read_jsonl, write_json_atomic
from eval.runs.words import WORDS_FILE, align_words
from eval.ui.word_view import row_words
from gepard_demo.alignment.result import AlignedWord, Alignment
from gepard_demo.alignment.words import text_words

TEXT = "It costs $5.50 today."
SPOKEN = "It costs five dollars fifty cents today."
TAG = "faster-whisper_tiny.en_int8"
# When each spoken word was said (seconds): the audio's truth.
SAID = [(0.3, 0.5), (0.5, 0.9), (1.0, 1.3), (1.3, 1.8), (1.9, 2.2), (2.2, 2.6), (2.7, 3.1)]


class SaidAligner:
    """Word i of the text it is given, over the i-th spoken word's time."""

    def __init__(self) -> None:
        self.given: list[str] = []

    def align(self, audio, rate, text):
        self.given.append(text)
        words = text_words(text)
        return Alignment(tuple(AlignedWord(w.word, w.written, *SAID[i], 0.9, 0.9, "aligned")
                               for i, w in enumerate(words)), audio_s=len(audio) / rate)


def read_run(path, text=TEXT, hyp="It costs five dollars fifty cents today.", mode="rules"):
    run = fake_run(path, [text], [hyp], extra=[{"spoken": SPOKEN, "wav": "wav/u000.wav"}], wavs=True)
    sf.write(run / "wav" / "u000.wav", np.zeros(int(3.4 * 22050), np.float32), 22050)
    write_json_atomic(run / "config.json", {"version": 1, "set_sha256": "x", "items": 1, "run": {
        "engine": "local", "model": "tiny", "set": "hand", "sampling": {"text_normalization": mode, "lexicon_entries": ""}}})
    return run


def test_the_written_token_is_timed_over_the_spoken_words_it_became(tmp_path):
    run = read_run(tmp_path / "run")
    score = read_jsonl(run / "asr" / TAG / "scores.jsonl")[0]
    assert (score["ref_norm"], score["hyp_norm"]) == ("it costs $5.50 today", "it costs $5.50 today")  # Whisper's normaliser
    assert score["wer_spoken"] == 0.0  # the row kept what was read, and is scored against it too
    aligner = SaidAligner()
    assert align_words(run, TAG, aligner=aligner, log=lambda m: None) == 1
    assert aligner.given == ["it costs five dollars fifty cents today"]  # the heard words as they were said
    ops = read_jsonl(run / "asr" / TAG / WORDS_FILE)[0]["ops"]
    assert [(o["op"], o["hyp"], o["s"], o["e"], o["written"], o.get("spoken")) for o in ops] == [
        ("ok", "it", 0.3, 0.5, "It", None), ("ok", "costs", 0.5, 0.9, "costs", None),
        ("ok", "$5.50", 1.0, 2.6, "$5.50", "five dollars fifty cents"),  # five (1.0) .. cents (2.6)
        ("ok", "today", 2.7, 3.1, "today.", None)]
    html = row_words(run, "u000")
    money = re.search(r"<span class='gepard-w' data-op='ok' data-seek='1.0' title='([^']*)'>\$5.50</span>", html)
    assert money, html
    assert money.group(1) == ("written &quot;$5.50&quot;, read as &quot;five dollars fifty cents&quot;; "
                              "heard &quot;$5.50&quot; at 1.00\u20132.60 s")
    assert "data-seek='2.7' title='written &quot;today.&quot;; heard &quot;today&quot; at 2.70\u20133.10 s'>today.<" in html


def test_a_token_over_several_words_is_shown_once_and_a_wrong_one_says_what_was_heard(tmp_path):
    # "3/4" is two normalised words ("3 4"); "St." normalises to "saint", and Whisper heard "street".
    text, hyp = "Meet on 3/4 at Main St.", "Meet on 3/4 at Main Street."
    run = fake_run(tmp_path / "run", [text], [hyp], extra=[{"spoken": "Meet on three slash four at Main St."}], wavs=True)
    write_json_atomic(run / "config.json", {"version": 1, "set_sha256": "x", "items": 1, "run": {
        "engine": "local", "model": "tiny", "set": "hand", "sampling": {"text_normalization": "rules"}}})
    align_words(run, TAG, aligner=SaidAligner(), log=lambda m: None)
    html = row_words(run, "u000")
    words = re.findall(r"data-op='(\w+)'[^>]*>([^<]*)</span>", html.split("gepard-words-note")[0])
    assert words == [("ok", "Meet"), ("ok", "on"), ("ok", "3/4"), ("ok", "at"), ("ok", "Main"), ("sub", "St.")]
    # "3/4": its two words (three 1.0-1.3, four 1.3-1.8) shown once, over both.
    assert "data-seek='1.0' title='written &quot;3/4&quot;, read as &quot;three slash four&quot;; heard &quot;3 4&quot; " \
           "at 1.00\u20131.80 s'>3/4<" in html
    assert "written &quot;St.&quot;; heard &quot;street&quot;" in html and "(for &quot;saint&quot;)" in html
    assert "1 substituted" in html  # the counts stay the WER's


def test_a_run_read_as_written_keeps_its_words_as_they_were(tmp_path):
    run = read_run(tmp_path / "run", mode="off")
    aligner = SaidAligner()
    align_words(run, TAG, aligner=aligner, log=lambda m: None)
    assert aligner.given == ["it costs $5.50 today"]
    ops = read_jsonl(run / "asr" / TAG / WORDS_FILE)[0]["ops"]
    assert all("written" not in o for o in ops) and ops[2]["hyp"] == "$5.50"
    assert "title='heard at 1.00 s'>$5.50<" in row_words(run, "u000")


@pytest.mark.slow
def test_on_real_speech_the_real_aligner_puts_the_written_token_over_its_spoken_words(tmp_path, aligner):
    said = spoken(["It costs", "five dollars fifty cents", "today."], [0.4, 0.4])
    run = read_run(tmp_path / "run")
    sf.write(run / "wav" / "u000.wav", said.audio, RATE, subtype="PCM_16")
    align_words(run, TAG, aligner=aligner, log=lambda m: None)
    money = read_jsonl(run / "asr" / TAG / WORDS_FILE)[0]["ops"][2]
    assert money["written"] == "$5.50"
    (start, end) = said.edges[1]
    assert abs(money["s"] - start) < 0.25 and abs(money["e"] - end) < 0.25, (money, said.edges)


def test_the_failure_lines_quote_the_text_as_written(tmp_path):
    from eval.compare.word_diff import render
    from eval.report.where import lost_where, wrong_where

    run = read_run(tmp_path / "run", hyp="It costs")  # cut after "costs": "$5.50 today." lost
    align_words(run, TAG, aligner=SaidAligner(), log=lambda m: None)
    ops = read_jsonl(run / "asr" / TAG / WORDS_FILE)[0]["ops"]
    assert lost_where(ops) == 'the words lost after 0.9 s: "$5.50 today."'
    assert wrong_where(ops) == '2 word errors over 4 words; the first at 0.9 s: "$5.50" not heard'
    # "St." is "saint" to Whisper's normaliser: the line says what the text says.
    run = fake_run(tmp_path / "st", ["Meet at Main St."], ["Meet at"], extra=[{"spoken": "Meet at Main St."}], wavs=True)
    write_json_atomic(run / "config.json", {"version": 1, "set_sha256": "x", "items": 1, "run": {
        "engine": "local", "model": "tiny", "set": "hand", "sampling": {"text_normalization": "rules"}}})
    align_words(run, TAG, aligner=SaidAligner(), log=lambda m: None)
    ops = read_jsonl(run / "asr" / TAG / WORDS_FILE)[0]["ops"]
    assert lost_where(ops) == 'the words lost after 0.9 s: "Main St."'
    assert render(ops) == "meet at [−Main St. @0.9 s]"  # compare's line for the utterance


def test_a_nemo_run_scored_without_the_library_is_timed_as_heard_and_says_so(tmp_path, monkeypatch):
    from gepard_demo.text.library import LibraryMissing, NemoNormalizer

    def missing(self, pieces):
        raise LibraryMissing("text_normalization 'nemo' needs nemo_text_processing and pynini (not here)")

    monkeypatch.setattr(NemoNormalizer, "pieces", missing)
    run = read_run(tmp_path / "run", mode="nemo")
    said, aligner = [], SaidAligner()
    assert align_words(run, TAG, aligner=aligner, log=said.append) == 1
    assert aligner.given == ["it costs $5.50 today"] and "nemo_text_processing" in said[0]
    assert all("written" not in o for o in read_jsonl(run / "asr" / TAG / WORDS_FILE)[0]["ops"])
