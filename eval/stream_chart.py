"""Charts of the streaming settings, measured on real decodes of generated frames.

Chunk size (first chunk = chunk size = c, per decode mode):
- ttfa_s = the wall time at which the engine committed frame c (from `stream_frames`' own
  per-step clock) + the time the codec streamer took to decode those first c frames.
- boundary error = max |streamed audio - one whole decode| over the utterance (0 for a
  decoder that carries its state exactly; lookback re-decode leaves an error at chunk starts,
  facts §4), also relative to the whole decode's peak.
- decode_s = total streamer time for the utterance (many small chunks cost more).
Fade / silence (apply_end_of_speech on the whole decode):
- end click = |last sample before the trailing zeros|: the step the waveform takes to 0
  when playback ends (a fade drives it to 0; silence padding alone does not, facts §5).
- tail_ms = audio length added by the shaping, in ms.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from eval.charts import save_figure  # noqa: E402
from eval.jsonio import replace_atomic  # noqa: E402
from eval.seeds import utterance_seed  # noqa: E402
from eval.sets import load_set  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402


@dataclass(frozen=True)
class StreamChartConfig:
    model: str = "tiny"
    model_cache: str | None = None
    set: str = "smoke"
    limit: int = 2
    base_seed: int = 1234
    max_frames: int = 100
    chunk_sizes: tuple[int, ...] = (5, 10, 20, 43, 86)
    lookback_frames: tuple[int, ...] = (0, 8, 24)
    fades_ms: tuple[float, ...] = (0, 5, 10, 20, 50)
    silences_ms: tuple[float, ...] = (0, 50, 100, 200)


def end_click(audio: np.ndarray) -> float:
    nz = np.flatnonzero(audio)
    return float(abs(audio[nz[-1]])) if nz.size else 0.0


def _streamed(codec, frames, chunk: int, mode: str, lookback: int) -> tuple[np.ndarray, float, float]:
    dec = codec.streamer(mode=mode, lookback=lookback)
    parts, first_s, total = [], None, 0.0
    for start in range(0, len(frames), chunk):
        t0 = time.perf_counter()
        parts.append(dec.push(frames[start : start + chunk]))
        dt = time.perf_counter() - t0
        total += dt
        if first_s is None:
            first_s = dt
    return np.concatenate(parts), first_s or 0.0, total


def measure(cfg: StreamChartConfig, engine, codec) -> tuple[pd.DataFrame, pd.DataFrame]:
    from gepard_demo.codec import apply_end_of_speech

    chunk_rows, tail_rows = [], []
    for u in load_set(cfg.set, cfg.limit):
        settings = SamplingSettings(max_frames=cfg.max_frames, seed=utterance_seed(cfg.base_seed, u.id))
        steps = [s for s in engine.stream_frames(u.text, settings) if s.codes is not None]
        import torch

        frames = torch.stack([s.codes for s in steps])
        whole = codec.decode(frames)
        peak = float(np.abs(whole).max()) or 1.0
        modes = [("exact", 0)] + [("lookback", lb) for lb in cfg.lookback_frames]
        for c in cfg.chunk_sizes:
            for mode, lb in modes:
                audio, first_s, total = _streamed(codec, frames, c, mode, lb)
                n = min(len(audio), len(whole))
                err = float(np.abs(audio[:n] - whole[:n]).max())
                k = min(c, len(steps))
                chunk_rows.append({"id": u.id, "chunk": c, "mode": mode if mode == "exact" else f"lookback {lb}",
                                   "ttfa_s": steps[k - 1].elapsed_s + first_s, "decode_s": total,
                                   "boundary_err": err, "boundary_err_rel": err / peak, "frames": len(steps)})
        for f in cfg.fades_ms:
            for s in cfg.silences_ms:
                shaped = apply_end_of_speech(whole, codec.sample_rate, f, s)
                tail_rows.append({"id": u.id, "fade_ms": f, "silence_ms": s, "end_click": end_click(shaped),
                                  "end_click_raw": end_click(whole),
                                  "tail_ms": 1000 * (len(shaped) - len(whole)) / codec.sample_rate})
    return pd.DataFrame(chunk_rows), pd.DataFrame(tail_rows)


def chart(chunks: pd.DataFrame, tails: pd.DataFrame, out: Path) -> list[Path]:
    g = chunks.groupby(["mode", "chunk"], as_index=False).agg(
        ttfa_s=("ttfa_s", "median"), boundary_err=("boundary_err", "max"), decode_s=("decode_s", "median"))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for mode, d in g.groupby("mode"):
        axes[0].plot(d["chunk"], d["ttfa_s"], marker="o", label=mode)
        axes[1].plot(d["chunk"], np.maximum(d["boundary_err"], 1e-9), marker="o", label=mode)
        axes[2].plot(d["chunk"], d["decode_s"], marker="o", label=mode)
    axes[0].set(xlabel="first chunk = chunk size (frames)", ylabel="TTFA s (median)", title="Time to first audio")
    axes[1].set(xlabel="chunk size (frames)", ylabel="max |streamed - whole decode|", yscale="log", title="Boundary error vs whole decode")
    axes[2].set(xlabel="chunk size (frames)", ylabel="decode s per utterance (median)", title="Streaming decode cost")
    for ax in axes:
        ax.set_xscale("log")
        ax.legend(fontsize=7)
    p1 = out / "chunk_size.png"
    save_figure(fig, p1)
    t = tails.groupby(["fade_ms", "silence_ms"], as_index=False).agg(end_click=("end_click", "mean"), tail_ms=("tail_ms", "mean"))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for s, d in t.groupby("silence_ms"):
        axes[0].plot(d["fade_ms"], d["end_click"], marker="o", label=f"silence {s:g} ms")
    for f, d in t.groupby("fade_ms"):
        axes[1].plot(d["silence_ms"], d["tail_ms"], marker="o", label=f"fade {f:g} ms")
    axes[0].set(xlabel="fade ms", ylabel="end click |last non-zero sample| (mean)", title="End click")
    axes[1].set(xlabel="silence ms", ylabel="added tail ms", title="Tail length")
    for ax in axes:
        ax.legend(fontsize=7)
    p2 = out / "fade_silence.png"
    save_figure(fig, p2)
    return [p1, p2]


def stream_chart(cfg: StreamChartConfig, out: str | Path, engine=None, codec=None) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if engine is None:
        from gepard_demo.codec import load_codec
        from gepard_demo.engine import GepardEngine

        engine = GepardEngine.load(cfg.model, cache_dir=cfg.model_cache)
        codec = load_codec(engine.codec_source())
    chunks, tails = measure(cfg, engine, codec)
    replace_atomic(out / "chunk_size.csv", lambda tmp: chunks.to_csv(tmp, index=False))
    replace_atomic(out / "fade_silence.csv", lambda tmp: tails.to_csv(tmp, index=False))
    chart(chunks, tails, out)
    return out
