"""The WER path on real speech: Piper (en_US-joe-medium) through the eval pipeline, scored
with the real Whisper tiny.en; and the converted openai-whisper checkpoint against
faster-whisper on the same audio."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eval.report.summary import write_outputs
from eval.runs.run import RunConfig, run
from eval.runs.score import score
from eval.runs.sets import load_set
from eval.scoring.asr import ASRSettings, Transcriber
from eval.scoring.audio import read_mono, to_16k
from gepard_demo.alignment.ct2_convert import read_model_bin
from eval.scoring.normalize import normalize
from gepard_demo.alignment.weights import ct2_dir

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def whisper_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("whisper-cache")


@pytest.fixture(scope="module")
def piper_run(tmp_path_factory):
    """The first two sentences of every category of the core set, spoken by Piper."""
    items, seen = [], {}
    for u in load_set("core"):
        if seen.get(u.category, 0) < 2:
            seen[u.category] = seen.get(u.category, 0) + 1
            items.append({"id": u.id, "text": u.text, "category": u.category})
    d = tmp_path_factory.mktemp("piper")
    set_file = d / "piper20.jsonl"
    set_file.write_text("".join(json.dumps(i) + "\n" for i in items))
    out = d / "run"
    run(RunConfig(engine="piper", model="en_US-joe-medium", set=str(set_file), batch_size=4), out, log=lambda m: None)
    return out


def test_piper_wer_is_low_with_tiny_en(piper_run, whisper_cache):
    tag = score(piper_run, ASRSettings(backend="faster-whisper", model="tiny.en"), cache=whisper_cache, log=lambda m: None)
    df, summary = write_outputs(piper_run, tag)
    wer = summary["overall"]["wer_corpus"]
    assert summary["overall"]["n_scored"] == 20
    assert wer["value"] < 0.15, df[["text", "hyp", "wer"]].to_string()
    # the interval brackets the estimate and the short sentences are heard exactly
    assert wer["ci_low"] <= wer["value"] <= wer["ci_high"]
    assert summary["by_category"]["short_1_3_words"]["exact_match_rate"]["value"] == 1.0
    # real speech at a plausible rate (Piper speaks faster than 0.7 + 0.4 s/word: ratio ~0.6)
    assert 0.4 < summary["overall"]["duration_ratio"]["median"] < 1.2
    assert summary["overall"]["stop_fired_rate"] is None  # no stop head: not counted as 0


def test_converted_openai_whisper_matches_faster_whisper(piper_run, whisper_cache):
    # Greedy, float32 on both sides: the same weights should give the same words.
    rows = [json.loads(l) for l in (piper_run / "rows.jsonl").read_text().splitlines()]
    picked = [r for r in rows if r["category"] in ("commands", "questions", "names_places", "dialogue")][:4]
    fw = Transcriber(ASRSettings(backend="faster-whisper", model="tiny.en", compute_type="float32"), whisper_cache)
    ow = Transcriber(ASRSettings(backend="openai-whisper", model="tiny.en"), whisper_cache)
    assert ow.model_path.suffix == ".pt" and str(whisper_cache) in str(ow.model_path)
    for r in picked:
        audio, sr = read_mono(piper_run / r["wav"])
        a, b = fw.transcribe(audio, sr), ow.transcribe(audio, sr)
        assert a, r["text"]
        assert normalize(a) == normalize(b), (r["text"], a, b)


def test_model_bin_reader_reads_the_bundle():
    spec, v = read_model_bin(ct2_dir("tiny.en") / "model.bin")
    assert spec == "WhisperSpec"
    assert v["decoder/embeddings/weight"].shape == (51864, 384)  # English-only vocabulary
    assert int(v["encoder/num_heads"]) == 6
    assert v["decoder/layer_0/self_attention/linear_0/weight"].shape == (3 * 384, 384)  # fused q/k/v


def test_resampling_keeps_a_tone():
    sr = 22050
    t = np.arange(sr) / sr
    x = to_16k(np.sin(2 * np.pi * 440 * t).astype(np.float32), sr)
    assert len(x) == 16000
    spec = np.abs(np.fft.rfft(x))
    assert abs(np.argmax(spec) - 440) <= 1
