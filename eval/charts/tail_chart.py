"""Fade and silence at the end of speech, measured on real speech (Piper, en_US-joe-medium).

Each sentence is synthesized once (kept in <out>/piper/<id>.wav, so reruns resume and every
setting shapes the same audio); every (fade_ms, silence_ms) then applies
gepard_demo.codec.apply_end_of_speech to it, as the app and the engines do.

End click (silence only pads, so it is measured per fade):
- last_step_dbfs = 20 log10 |last sample before the end or the padding|: the jump to zero a
  player makes when the audio stops (or the silence starts); full scale = 0 dBFS.
- hf_energy_dbfs = 10 log10 of the mean power above 4 kHz in a 20 ms window: the last 10 ms of
  the sound and the 10 ms of zeros that follow it (a click is broadband; speech has little
  energy up there).
ASR effect (Whisper as configured, VAD trim included; each distinct audio transcribed once):
- final_deleted = the alignment ends in deleted reference words (eval.scoring.metrics end_deletions > 0)
- invented_words = words Whisper inserted after the last reference word it matched or
  substituted (trailing insertions of the alignment)
Rates and means get 95% bootstrap CIs over sentences. Files: tail_rows.csv, tail_click.png/.csv,
tail_asr.png/.csv.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from eval.charts.style import RunContext, finish, new_figure, save_chart, series_style
from eval.jsonio import replace_atomic, write_json_atomic
from eval.scoring.bootstrap import mean_ci
from eval.scoring.metrics import trailing_edits

HF_CUTOFF_HZ = 4000.0
WINDOW_MS = 10.0
FLOOR_DB = -120.0


@dataclass(frozen=True)
class TailChartConfig:
    set: str = "core"
    limit: int | None = 20
    fades_ms: tuple[float, ...] = (0, 5, 10, 20, 50)
    silences_ms: tuple[float, ...] = (0, 100, 300)


def _db(x: float, power: bool) -> float:
    if x <= 0:
        return FLOOR_DB
    return max(FLOOR_DB, (10 if power else 20) * float(np.log10(x)))


def last_step_dbfs(shaped: np.ndarray, silence_samples: int) -> float:
    """|last sample of the sound| in dBFS (the sound ends before the silence padding)."""
    sound = shaped[: len(shaped) - silence_samples] if silence_samples else shaped
    return _db(abs(float(sound[-1])) if len(sound) else 0.0, power=False)


def hf_energy_dbfs(shaped: np.ndarray, silence_samples: int, sample_rate: int) -> float:
    sound = shaped[: len(shaped) - silence_samples] if silence_samples else shaped
    w = int(sample_rate * WINDOW_MS / 1000)
    win = np.concatenate([sound[-w:], np.zeros(w, np.float32)]).astype(np.float64)
    spec = np.fft.rfft(win)
    freqs = np.fft.rfftfreq(len(win), 1 / sample_rate)
    spec[freqs < HF_CUTOFF_HZ] = 0
    hp = np.fft.irfft(spec, n=len(win))
    return _db(float(np.mean(hp**2)), power=True)


def trailing_insertions(ref_norm: str, hyp_norm: str) -> int:
    """Hypothesis words after the last reference word that was matched or substituted."""
    import jiwer

    if not hyp_norm.split():
        return 0
    if not ref_norm.split():
        return len(hyp_norm.split())
    return trailing_edits(jiwer.process_words(ref_norm, hyp_norm).alignments[0])[1]


def _piper_audio(items, out: Path) -> tuple[dict[str, np.ndarray], int]:
    from eval.engines.piper import PiperReference
    from eval.engines.request import SynthesisItem
    from eval.scoring.audio import read_mono, write_wav_atomic
    from gepard_demo.settings import SamplingSettings, StreamSettings

    folder = out / "piper"
    folder.mkdir(parents=True, exist_ok=True)
    audio: dict[str, np.ndarray] = {}
    sr: int | None = None
    engine = None
    for u in tqdm(items, desc="tail-chart Piper speech", unit="utt"):
        p = folder / f"{u.id}.wav"
        if not p.is_file():
            engine = engine or PiperReference.load()
            s = engine.synthesize([SynthesisItem(u.text, 0, uid=u.id)], SamplingSettings(), StreamSettings())[0]
            write_wav_atomic(p, s.audio, s.sample_rate)
        audio[u.id], sr = read_mono(p)
    assert sr is not None  # items come from load_set, which refuses an empty set: a clip was read
    return audio, sr


def measure(cfg: TailChartConfig, out: Path, transcriber) -> pd.DataFrame:
    from eval.runs.sets import load_set
    from eval.scoring.metrics import word_errors
    from eval.scoring.normalize import normalize
    from gepard_demo.codec import apply_end_of_speech
    from gepard_demo.codec.tail import tail_lengths

    items = load_set(cfg.set, cfg.limit)
    audio, sr = _piper_audio(items, out)
    rows = []
    # One bar over the clips transcribed (cached ones pass at once), with the time left.
    bar = tqdm(total=len(items) * len(cfg.fades_ms) * len(cfg.silences_ms), desc="tail-chart clips", unit="clip")
    for u in items:
        ref = normalize(u.text)
        for f in cfg.fades_ms:
            for s in cfg.silences_ms:
                shaped = apply_end_of_speech(audio[u.id], sr, f, s)
                _, n_sil = tail_lengths(sr, f, s)
                hyp = normalize(transcriber.transcribe(shaped, sr))
                we = word_errors(ref, hyp)
                rows.append({"id": u.id, "category": u.category, "fade_ms": f, "silence_ms": s,
                             "last_step_dbfs": last_step_dbfs(shaped, n_sil), "hf_energy_dbfs": hf_energy_dbfs(shaped, n_sil, sr),
                             "hyp_norm": hyp, "wer": we.wer, "end_deletions": we.end_deletions,
                             "final_deleted": we.end_deletions > 0, "invented_words": trailing_insertions(ref, hyp)})
                bar.update(1)
    bar.close()
    return pd.DataFrame(rows)


def _ci_table(df: pd.DataFrame, keys: list[str], cols: list[str]) -> pd.DataFrame:
    out = []
    for k, g in df.groupby(keys):
        rec = dict(zip(keys, k if isinstance(k, tuple) else (k,)))
        for c in cols:
            iv = mean_ci(g[c].astype(float).to_numpy())
            rec.update({c: iv.value, f"{c}_ci_low": iv.low, f"{c}_ci_high": iv.high})
        rec["n"] = len(g)
        out.append(rec)
    return pd.DataFrame(out)


def _errorbars(ax, x, d, col, scale=1.0, **style):
    ax.errorbar(x, scale * d[col], yerr=[scale * (d[col] - d[f"{col}_ci_low"]), scale * (d[f"{col}_ci_high"] - d[col])],
                capsize=3, lw=1.3, ms=5, **style)


def click_chart(rows: pd.DataFrame, fades, context, path: Path) -> Path:
    one = rows[rows["silence_ms"] == rows["silence_ms"].min()]  # silence pads after the sound: no effect on these
    t = _ci_table(one, ["fade_ms"], ["last_step_dbfs", "hf_energy_dbfs"])
    fig, axs = new_figure(1, 2, width=11, height=4.2)
    x = [list(fades).index(f) for f in t["fade_ms"]]
    _errorbars(axs[0, 0], x, t, "last_step_dbfs", **series_style(0))
    _errorbars(axs[0, 1], x, t, "hf_energy_dbfs", **series_style(1))
    axs[0, 0].set_ylabel("last sample step (dBFS, mean)")
    axs[0, 0].set_title("Jump to zero where the sound ends")
    axs[0, 1].set_ylabel(f"power above {HF_CUTOFF_HZ / 1000:g} kHz at the end (dBFS, mean)")
    axs[0, 1].set_title("High-frequency energy at the end (the click)")
    for ax in axs[0]:
        ax.set_xticks(range(len(fades)), [f"{f:g}" for f in fades])
        ax.set_xlabel("fade at the end (ms)")
    finish(fig, "End click against fade length (Piper real speech)", context,
           note=f"lower is quieter; {FLOOR_DB:g} dBFS = exactly zero; high-frequency window: the last {WINDOW_MS:g} ms of "
                f"the sound and the {WINDOW_MS:g} ms after it; bars: 95% bootstrap CI over sentences; silence padding "
                "does not change these (it comes after the sound)")
    return save_chart(fig, path, t)


def asr_chart(rows: pd.DataFrame, fades, context, path: Path) -> Path:
    t = _ci_table(rows, ["silence_ms", "fade_ms"], ["final_deleted", "invented_words"])
    fig, axs = new_figure(1, 2, width=11, height=4.2)
    for i, (s, d) in enumerate(t.groupby("silence_ms")):
        x = np.array([list(fades).index(f) for f in d["fade_ms"]]) + (i - 1) * 0.06
        _errorbars(axs[0, 0], x, d, "final_deleted", 100.0, label=f"silence {s:g} ms", **series_style(i))
        _errorbars(axs[0, 1], x, d, "invented_words", label=f"silence {s:g} ms", **series_style(i))
    axs[0, 0].set_ylabel("sentences whose last word(s) Whisper lost (%)")
    axs[0, 0].set_title("Final-word deletions")
    axs[0, 1].set_ylabel("words invented after the end (per sentence, mean)")
    axs[0, 1].set_title("Words Whisper adds after the end")
    for ax in axs[0]:
        ax.set_xticks(range(len(fades)), [f"{f:g}" for f in fades])
        ax.set_xlabel("fade at the end (ms)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    finish(fig, "What fade and silence do to the transcript's end (Piper real speech)", context,
           note="bars: 95% bootstrap CI over sentences")
    return save_chart(fig, path, t)


def tail_chart(cfg: TailChartConfig, out: str | Path, asr, cache: Path | None = None, transcriber=None) -> Path:
    """Measure (resumable: Piper audio and transcripts are cached in <out>) and draw both charts."""
    from eval.runs.score import asr_tag
    from eval.scoring.transcript_cache import CachedTranscriber

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tag = asr_tag(asr)
    cached = CachedTranscriber(asr, out / "asr_cache" / f"{tag}.jsonl", weights_cache=cache, inner=transcriber)
    rows = measure(cfg, out, cached)
    replace_atomic(out / "tail_rows.csv", lambda tmp: rows.to_csv(tmp, index=False))
    write_json_atomic(out / "tail_chart.json", {"config": dataclasses.asdict(cfg), "asr": tag,
                                                "transcribed": cached.misses, "cache_hits": cached.hits})
    context = RunContext(model="Piper en_US-joe-medium (reference engine)", random_weights=False,
                         set=Path(cfg.set).name, n=int(rows["id"].nunique()), asr=tag, device="cpu",
                         date=time.strftime("%Y-%m-%d"))
    fades = list(cfg.fades_ms)
    click_chart(rows, fades, context, out / "tail_click.png")
    asr_chart(rows, fades, context, out / "tail_asr.png")
    return out

