"""ASR scoring of a run folder, separate from synthesis and resumable.

Writes <run>/asr/<tag>/config.json (the ASRSettings and the weights used) and
<run>/asr/<tag>/scores.jsonl: one row per scored utterance with the transcript, both
normalized strings and the word / character error counts (eval.scoring.metrics). Rerunning scores
only rows without a score; a run still being synthesized can be scored again later.
"""

from __future__ import annotations

import time
from pathlib import Path

from tqdm import tqdm

from eval.jsonio import append_jsonl, read_jsonl, write_json_atomic
from eval.runs.environment import package_versions
from eval.runs.run import synthesized_rows
from eval.scoring.asr import ASRSettings, SpeechToText, Transcriber
from eval.scoring.audio import read_mono
from eval.scoring.metrics import word_errors
from eval.scoring.normalize import normalize
from gepard_demo.alignment.weights import DEFAULT_CACHE


def asr_tag(s: ASRSettings) -> str:
    model = Path(s.model).name if ("/" in s.model) else s.model
    tag = f"{s.backend}_{model}"
    if s.backend == "faster-whisper":
        tag += f"_{s.compute_type}"
    if s.beam_size > 1:
        tag += f"_beam{s.beam_size}"
    if not s.vad:
        tag += "_novad"
    return tag


def scored_tags(run_dir: str | Path) -> list[str]:
    d = Path(run_dir) / "asr"
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if (p / "scores.jsonl").is_file())


def score_row(row: dict, hyp: str) -> dict:
    """WER against the written text (`wer`, as always), and where the row kept what the model read
    (its `spoken`: the text front end's reading), also against that (`wer_spoken`), so the effect of
    normalising is not an artefact of scoring."""
    ref_n, hyp_n = normalize(row["text"]), normalize(hyp)
    out = {"id": row["id"], "hyp": hyp, "ref_norm": ref_n, "hyp_norm": hyp_n, **word_errors(ref_n, hyp_n).as_dict()}
    if row.get("spoken") is not None:
        spoken_n = normalize(row["spoken"])
        said = word_errors(spoken_n, hyp_n)
        out.update(ref_spoken_norm=spoken_n, wer_spoken=said.wer, errors_spoken=said.errors, n_ref_spoken=said.n_ref)
    return out


def score(run_dir: str | Path, settings: ASRSettings, transcriber: SpeechToText | None = None,
          cache: Path = DEFAULT_CACHE, progress=None, log=print, words: bool = True) -> str:
    """Score every unscored row; returns the ASR tag (the folder under <run>/asr/). words: then
    align each scored row's words in time (eval/runs/words.py), the rows without them."""
    run_dir = Path(run_dir)
    rows = synthesized_rows(run_dir)
    tag = asr_tag(settings)
    out = run_dir / "asr" / tag
    out.mkdir(parents=True, exist_ok=True)
    scores_path = out / "scores.jsonl"
    have = {r["id"] for r in read_jsonl(scores_path, repair=True)}
    todo = [r for r in rows if r["id"] not in have]
    if todo:
        if transcriber is None:
            transcriber = Transcriber(settings, cache)
        write_json_atomic(out / "config.json", {
            "asr": settings.as_dict(), "weights": str(transcriber.model_path),
            "packages": {k: v for k, v in package_versions().items() if k in ("openai-whisper", "faster-whisper", "ctranslate2", "jiwer", "soxr")},
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        })
    bar = tqdm(total=len(rows), initial=len(have), desc=f"asr {tag}", unit="utt")
    for i, row in enumerate(todo):
        assert transcriber is not None  # made above whenever there is a row to score
        audio, sr = read_mono(run_dir / row["wav"])
        t0 = time.perf_counter()
        hyp = transcriber.transcribe(audio, sr)
        asr_s = time.perf_counter() - t0
        append_jsonl(scores_path, {**score_row(row, hyp), "asr_s": asr_s})
        bar.update(1)
        if progress:
            progress(len(have) + i + 1, len(rows))
    bar.close()
    if words:
        from eval.runs.words import align_words

        align_words(run_dir, tag, cache=cache, log=log)
    return tag
