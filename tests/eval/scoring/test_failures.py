"""The failure detectors on constructed audio: real speech (Piper) with a looped tail, a 2-second
pause inside it, 2 s of trailing silence, a truncation; pure silence; noise. Each goes through a
real run folder, real Whisper (faster-whisper tiny.en) and the audio measures, and each detector
must fire on its case and stay quiet on the clean sentence: removing a detector fails its test.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from eval.engines.base import EvalEngine, Synthesis
from eval.engines.request import SynthesisItem
from eval.report.failures import flags
from eval.report.summary import load_table, write_outputs
from eval.runs.measure import measure
from eval.runs.run import RunConfig, run
from eval.runs.score import score
from eval.runs.seeds import utterance_seed
from eval.scoring.asr import ASRSettings
from eval.scoring.loops import frame_loop, transcript_loop
from eval.scoring.naturalness import dnsmos
from eval.scoring.rates import Count, wilson

pytestmark = pytest.mark.slow

SENTENCE = "I bought fresh bread and milk from the store."
LOOPED = "I bought fresh bread and milk from the store the store the store the store."
CASES = ("clean", "looped_tail", "inner_pause", "trailing_silence", "truncated", "silence", "noise", "asked_pause",
         "pause_elsewhere")
# The inner pause's audio, its text asking for the 2 s there (after "bread": the middle third's
# gap), or at the end of the sentence, where the audio has none.
TEXTS = {"asked_pause": 'I bought fresh bread <break time="2s"/> and milk from the store.',
         "pause_elsewhere": 'I bought fresh bread and milk from the <break time="2s"/> store.'}


@pytest.fixture(scope="module")
def piper():
    from eval.engines.piper import PiperReference

    return PiperReference.load()


def _speak(piper, text: str) -> tuple[np.ndarray, int]:
    s = piper.synthesize([SynthesisItem(text, 0)], None, RunConfig().stream)[0]
    return s.audio, s.sample_rate


def constructed(piper) -> dict[str, tuple[np.ndarray, int]]:
    clean, sr = _speak(piper, SENTENCE)
    looped, _ = _speak(piper, LOOPED)
    # The pause goes into the quietest 20 ms of the middle third: a gap between two words.
    hop = sr // 50
    third = len(clean) // 3
    energy = (clean[third : third + (third // hop) * hop].reshape(-1, hop) ** 2).mean(1)
    cut = third + int(np.argmin(energy)) * hop
    rng = np.random.default_rng(0)
    return {
        "clean": (clean, sr),
        "looped_tail": (looped, sr),
        "inner_pause": (np.concatenate([clean[:cut], np.zeros(2 * sr, np.float32), clean[cut:]]), sr),
        "asked_pause": (np.concatenate([clean[:cut], np.zeros(2 * sr, np.float32), clean[cut:]]), sr),
        "pause_elsewhere": (np.concatenate([clean[:cut], np.zeros(2 * sr, np.float32), clean[cut:]]), sr),
        "trailing_silence": (np.concatenate([clean, np.zeros(2 * sr, np.float32)]), sr),
        "truncated": (clean[: int(0.35 * len(clean))], sr),
        "silence": (np.zeros(3 * sr, np.float32), sr),
        "noise": ((0.2 * rng.standard_normal(3 * sr)).astype(np.float32), sr),
    }


class Constructed(EvalEngine):
    """An eval engine that returns each case's constructed audio. Every case asks for the same
    sentence (the reference the model was given); the seed, a function of the case's id, routes."""

    name = "constructed"

    def __init__(self, audio: dict, base_seed: int):
        self.audio = audio
        self.case_of = {utterance_seed(base_seed, c): c for c in CASES}

    def describe(self):
        return {"engine": self.name, "model": "piper-constructed", "random_weights": False}

    def synthesize(self, items, sampling, stream):
        out = []
        for seed in (item.seed for item in items):
            a, sr = self.audio[self.case_of[seed]]
            out.append(Synthesis(audio=a, sample_rate=sr, frames=None, stop_frame=None,
                                 p_stop=None, seed=seed, gen_s=0.0, decode_s=0.0, ttfa_s=0.0))
        return out


@pytest.fixture(scope="module")
def table(piper, tmp_path_factory):
    d = tmp_path_factory.mktemp("failures")
    set_file = d / "set.jsonl"
    set_file.write_text("".join(json.dumps({"id": c, "text": TEXTS.get(c, SENTENCE)}) + "\n" for c in CASES))
    cfg = RunConfig(engine="piper", set=str(set_file), batch_size=len(CASES))
    run(cfg, d / "run", engine=Constructed(constructed(piper), cfg.base_seed), log=lambda m: None)
    tag = score(d / "run", ASRSettings(backend="faster-whisper", model="tiny.en"), log=lambda m: None)
    measure(d / "run", dnsmos="on", log=lambda m: None)  # every clip, whatever this machine's DNSMOS costs
    df, _ = load_table(d / "run", tag)
    return df.set_index("id"), flags(df).set_axis(df["id"]), d / "run"


def fired(table, case):
    """The failure entries that fired for one case."""
    return {name for name, v in table[1].loc[case].items() if name != "any" and v is not None and not pd.isna(v) and bool(v)}


def test_clean_speech_fails_nothing(table):
    assert fired(table, "clean") == set(), table[0].loc["clean", "hyp"]
    df = table[0]
    assert df.loc["clean", "speaking_rate_wps"] > 1.5 and 60 < df.loc["clean", "f0_median_hz"] < 200


def test_a_looped_tail_is_a_loop(table):
    df = table[0]
    assert "loop" in fired(table, "looped_tail"), df.loc["looped_tail", "hyp"]
    assert df.loc["looped_tail", "loop_ngram"] in ("the store", "store the", "the store the", "store the store")


def test_an_inner_pause_is_a_long_pause_that_asr_does_not_see(table):
    df = table[0]
    assert fired(table, "inner_pause") == {"long_pause"}, df.loc["inner_pause", "hyp"]
    assert 1.8 < df.loc["inner_pause", "longest_pause_s"] < 2.3
    assert df.loc["inner_pause", "wer"] <= df.loc["clean", "wer"] + 0.2


def test_a_pause_the_text_asked_for_is_not_a_long_pause_but_one_elsewhere_is(table):
    """Only the silence beyond what a <break> asked for, at its place, counts (timing.unasked_gaps)."""
    df = table[0]
    assert "long_pause" not in fired(table, "asked_pause") and df.loc["asked_pause", "longest_pause_s"] < 0.5
    assert "long_pause" in fired(table, "pause_elsewhere")
    assert df.loc["pause_elsewhere", "longest_pause_s"] == df.loc["inner_pause", "longest_pause_s"]


def test_trailing_silence(table):
    assert fired(table, "trailing_silence") == {"trailing_silence"}
    assert 1.8 < table[0].loc["trailing_silence", "trailing_silence_s"] < 2.3


def test_truncation(table):
    assert "truncated" in fired(table, "truncated")


def test_pure_silence_and_noise_have_no_speech(table):
    assert {"no_speech", "empty_transcript"} <= fired(table, "silence")
    assert "no_speech" in fired(table, "noise")
    assert table[0].loc["silence", "dnsmos_ovrl"] is None or np.isnan(table[0].loc["silence", "dnsmos_ovrl"])


def test_the_report_lists_each_failure_with_its_wav(table):
    _, summary = write_outputs(table[2])
    f = summary["overall"]["failures"]
    assert f["long_pause"]["ids"] == ["inner_pause", "pause_elsewhere"] and f["long_pause"]["k"] == 2
    assert f["long_pause"]["n"] >= 5
    assert f["loop"]["ids"] == ["looped_tail"]
    lo, hi = wilson(2, f["long_pause"]["n"])
    assert (f["long_pause"]["ci_low"], f["long_pause"]["ci_high"]) == pytest.approx((lo, hi))
    assert summary["overall"]["naturalness"]["dnsmos_ovrl"]["n"] >= 4  # the clips with speech


def test_dnsmos_is_none_on_empty_and_silent_clips_and_does_not_hang():
    assert dnsmos(np.zeros(0, np.float32))["dnsmos_ovrl"] is None
    assert dnsmos(np.zeros(16000 * 3, np.float32))["dnsmos_ovrl"] is None


def test_frame_loops_on_constructed_codes():
    rng = np.random.default_rng(1)
    sr, spf = 22050, 1024
    loud = (0.3 * rng.standard_normal(120 * spf)).astype(np.float32)
    fresh = rng.integers(0, 6, size=(120, 32))
    assert not frame_loop(fresh, loud, sr)["frame_loop"]
    looped = fresh.copy()
    looped[40:100] = np.tile(fresh[40:50], (6, 1))  # a 10-frame syllable six times: 2.8 s
    r = frame_loop(looped, loud, sr)
    assert r["frame_loop"] and r["frame_loop_lag"] == 10 and 2.5 < r["frame_loop_s"] < 3.0
    stuck = fresh.copy()
    stuck[60:90] = fresh[60]  # one frame held for 1.4 s
    assert frame_loop(stuck, loud, sr)["frame_loop_lag"] == 1
    quiet = loud.copy()
    quiet[40 * spf : 100 * spf] = 0  # a codec's silence repeats too: not a loop
    assert not frame_loop(looped, quiet, sr)["frame_loop"]


def test_transcript_loops_and_wilson():
    assert transcript_loop("i bought bread", "i bought bread bread bread bread")["transcript_loop"]
    assert not transcript_loop("the the cat", "the the cat")["transcript_loop"]
    assert transcript_loop("stop here", "stop here and then it keeps going on")["end_insertions"] == 6
    assert wilson(0, 30) == pytest.approx((0.0, 0.1135), abs=1e-3)  # not [0, 0], as a bootstrap of zeros says
    assert Count.of({"a": True, "b": False, "c": None}).as_dict()["n"] == 2
    assert wilson(30, 30)[1] == 1.0 and wilson(0, 30)[0] == 0.0  # exact at the ends, not 1 - 1e-16


def test_summary_rates_are_counts_with_wilson_intervals(tmp_path):
    """No runaway in 20 utterances is 0/20 with an upper bound of 16%, in summary.json and report.md."""
    from tests.support.eval_fixtures import fake_run

    from eval.report.markdown import make_report

    texts = [f"turn the light number {i} off" for i in range(20)]
    run_dir = fake_run(tmp_path / "r", texts, texts)
    _, summary = write_outputs(run_dir)
    r = summary["overall"]["runaway_rate"]
    assert (r["k"], r["n"], r["value"], r["ci_low"]) == (0, 20, 0.0, 0.0)
    assert r["ci_high"] == pytest.approx(wilson(0, 20)[1]) and r["ci_high"] > 0.15
    report = make_report(run_dir).read_text()
    assert "| runaway (budget or force stop) | 0.0% [0.0%, 16.1%] (0/20) |" in report
    assert "Random weights" not in report  # said only of a test checkpoint


def test_dnsmos_scores_every_row_by_default_whatever_the_machine_does(table, tmp_path):
    """What a run contains follows from its command: DNSMOS (on by default) scores every row, with
    the cores busy or not, and says what it cost; "off" scores none; no mode depends on the load.
    The module's run was scored with the cores as the suite left them; its copy is scored here
    with a thread keeping a core busy, and must hold the same rows."""
    import shutil
    import threading

    d, busy_copy = tmp_path / "run", tmp_path / "busy"
    for copy in (d, busy_copy):
        shutil.copytree(table[2], copy)
        (copy / "dnsmos.jsonl").unlink()
    said = []
    assert measure(d, dnsmos="off", log=said.append)["dnsmos"] == 0 and not (d / "dnsmos.jsonl").exists()
    stop = threading.Event()
    burner = threading.Thread(target=lambda: [sum(range(10_000)) for _ in iter(stop.is_set, True)], daemon=True)
    burner.start()  # another job on the cores
    try:
        counts = measure(busy_copy, log=said.append)  # dnsmos left at its default
    finally:
        stop.set()
    assert counts["dnsmos"] == len(CASES) and counts["dnsmos_cost"] > 0
    assert len(said) == 1 and "CPU-s per audio-s" in said[0] and "--dnsmos off" in said[0]
    ids = lambda run: {r["id"] for r in map(json.loads, (run / "dnsmos.jsonl").read_text().splitlines())}  # noqa: E731
    assert ids(table[2]) == ids(busy_copy) and len(ids(busy_copy)) == len(CASES)
    with pytest.raises(ValueError, match="dnsmos must be one of"):
        measure(d, dnsmos="auto")


def test_where_places_a_long_pause_past_the_silence_the_text_asked_for():
    """report/where.py places a long pause as the rule counts it: a 2 s gap a <break> asked for
    after "five" gives way to the real 1.5 s one after "two"."""
    from eval.report.where import pause_where
    from eval.scoring.timing import asked_pauses

    ops, t = [], 0.0
    for k, word in enumerate("one two three four five six seven eight".split()):
        ops.append({"op": "ok", "ref": word, "hyp": word, "s": t, "e": t + 0.4})
        t += 0.5 + {1: 1.5, 4: 2.0}.get(k, 0.0)
    assert pause_where(ops).startswith('a 2.1 s pause between "five" and "six"')
    asked = asked_pauses('one two three four five <break time="2s"/> six seven eight')
    assert asked == [(5 / 8, 2.0)]
    assert pause_where(ops, asked=asked) == 'a 1.6 s pause between "two" and "three" (0.9-2.5 s)'
