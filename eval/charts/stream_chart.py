"""Streaming settings charts that answer "what should I deploy", from real decodes of generated frames.

For every utterance (frames generated once by the engine) and chunk size c (first chunk =
chunk size = c; categorical axis 5, 10, 20, 43, 86 by default) the codec streamer decodes the
frames chunk by chunk on this machine; each chunk's decode time is measured.

Simulated hardware (the stalls): generation runs at `rtf` x real time (RTF 0.1, 0.5, 0.9:
a frame of 1024 samples at 22.05 kHz = 46.4 ms of audio takes rtf x 46.4 ms to generate),
decoding costs what it measured here, and one thread does both in turn, as the streaming
session does. Chunk k is ready when its frames are generated and it is decoded; playback
starts with chunk 1 (TTFA = its ready time) and plays without pause while the next chunk is
ready in time; otherwise the listener hears a gap (a stall) until it is.
  ttfa_s     = ready time of chunk 1
  gaps       = number of stalls after playback started; gap_s = their total length
Boundary error (decode mode "lookback" with L frames of re-decoded history, against one
whole decode of the same frames): SNR in dB = 10 log10(sum whole^2 / sum (streamed - whole)^2);
the exact streamer equals the whole decode (reported as EXACT_SNR_DB, drawn as "exact").
Codec cost = decode seconds per second of audio (measured here, exact mode), per chunk size.
Files: chunk_timing.csv (per utterance, chunk, mode), stream_stalls.png/.csv,
boundary_snr.png/.csv, codec_cost.png/.csv.

Resuming: each measured row is appended to chunk_timing.csv (one write, fsynced) as soon as it
is measured; a rerun with the same IDENTITY settings (stream_chart.json) measures only the
rows missing (a torn last line is dropped), and other settings start the file afresh.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from eval.charts.style import RunContext, finish, new_figure, save_chart, series_style
from eval.jsonio import append_line, write_json_atomic
from eval.runs.seeds import utterance_seed
from eval.runs.sets import load_set
from gepard_demo.settings import SamplingSettings
from gepard_demo.model.request import FrameRequest

EXACT_SNR_DB = 150.0  # drawn for a bit-exact (or float-noise-level) streamed decode
COLUMNS = ("id", "category", "frames", "chunk", "mode", "lookback", "snr_db", "max_abs_err", "decode_s",
           "decode_s_per_audio_s", "chunk_timing")
# Settings a measured row depends on (the frames generated, hence every number in it). The
# others only choose which rows are wanted (limit, chunk sizes, lookbacks), how they are drawn
# (the simulated RTFs) or where the weights are cached, so changing them keeps the rows.
IDENTITY = ("model", "set", "base_seed", "max_frames")


@dataclass(frozen=True)
class StreamChartConfig:
    model: str = "tiny"
    model_cache: str | None = None
    set: str = "smoke"
    limit: int = 2
    base_seed: int = 1234
    max_frames: int = 100
    chunk_sizes: tuple[int, ...] = (5, 10, 20, 43, 86)
    lookback_frames: tuple[int, ...] = (0, 4, 8, 16, 24)
    hardware_rtfs: tuple[float, ...] = (0.1, 0.5, 0.9)


def snr_db(whole: np.ndarray, streamed: np.ndarray) -> float:
    n = min(len(whole), len(streamed))
    err = float(np.sum((streamed[:n].astype(np.float64) - whole[:n]) ** 2))
    sig = float(np.sum(whole[:n].astype(np.float64) ** 2))
    if err == 0.0 or sig == 0.0:
        return EXACT_SNR_DB
    return min(EXACT_SNR_DB, 10 * np.log10(sig / err))


def _decode_chunks(codec, frames, chunk: int, mode: str, lookback: int) -> tuple[np.ndarray, list[tuple[int, float]]]:
    """Streamed audio and, per chunk, (frames in it, decode seconds)."""
    dec = codec.streamer(mode=mode, lookback=lookback)
    parts, timing = [], []
    for start in range(0, len(frames), chunk):
        piece = frames[start : start + chunk]
        t0 = time.perf_counter()
        parts.append(dec.push(piece))
        timing.append((len(piece), time.perf_counter() - t0))
    return np.concatenate(parts), timing


def simulate_playback(timing: list[tuple[int, float]], rtf: float, frame_s: float) -> dict:
    """TTFA, stall count and total stall seconds for one utterance (module docstring)."""
    clock, play_end, ttfa, gaps, gap_s = 0.0, None, None, 0, 0.0
    for n, decode_s in timing:
        clock += n * frame_s * rtf + decode_s  # generate the chunk's frames, then decode them
        if play_end is None:
            ttfa, play_end = clock, clock + n * frame_s
            continue
        if clock > play_end:
            gaps += 1
            gap_s += clock - play_end
            play_end = clock
        play_end += n * frame_s
    return {"ttfa_s": ttfa or 0.0, "gaps": gaps, "gap_s": gap_s}


def row_key(uid, chunk, mode: str, lookback) -> tuple:
    """What tells two measured rows apart (exact mode has no lookback)."""
    return str(uid), int(chunk), str(mode), int(lookback) if mode == "lookback" else None


def _settings(cfg: StreamChartConfig) -> list[tuple[int, str, int]]:
    """(chunk, mode, lookback) of every row an utterance gets."""
    modes = [("exact", 0)] + [("lookback", lb) for lb in cfg.lookback_frames]
    return [(c, mode, lb) for c in cfg.chunk_sizes for mode, lb in modes]


def measure(cfg: StreamChartConfig, engine, codec, done=frozenset(), write=None) -> pd.DataFrame:
    """One row per (utterance, chunk size, decode mode): timing per chunk, SNR, cost.

    Rows whose row_key is in `done` are skipped (an utterance with none missing is not even
    generated); each new row goes to `write` as soon as it is measured.
    """
    import torch

    rows = []
    frame_s = codec.samples_per_frame / codec.sample_rate
    items = load_set(cfg.set, cfg.limit)
    work = {u.id: [(c, mode, lb) for c, mode, lb in _settings(cfg) if row_key(u.id, c, mode, lb) not in done]
            for u in items}
    # One bar over the rows to measure, with the time left: a default chart takes minutes on 2 cores.
    bar = tqdm(total=sum(map(len, work.values())), desc="stream-chart rows", unit="row")
    for u in items:
        todo = work[u.id]
        if not todo:
            continue
        bar.set_postfix_str(f"{u.id}: generating", refresh=True)
        settings = SamplingSettings(max_frames=cfg.max_frames, seed=utterance_seed(cfg.base_seed, u.id))
        frames = torch.stack([s.codes for s in engine.stream_frames(FrameRequest(u.text, settings)) if s.codes is not None])
        whole = codec.decode(frames)
        audio_s = len(frames) * frame_s
        for c, mode, lb in todo:
            audio, timing = _decode_chunks(codec, frames, c, mode, lb)
            decode_s = sum(t for _, t in timing)
            row = {"id": u.id, "category": u.category, "frames": len(frames), "chunk": c, "mode": mode,
                   "lookback": lb if mode == "lookback" else None, "snr_db": snr_db(whole, audio),
                   "max_abs_err": float(np.abs(audio[: len(whole)] - whole[: len(audio)]).max()),
                   "decode_s": decode_s, "decode_s_per_audio_s": decode_s / audio_s,
                   "chunk_timing": [[n, t] for n, t in timing]}
            if write:
                write(row)
            rows.append(row)
            bar.set_postfix_str(f"{u.id}: decoding", refresh=False)
            bar.update(1)
    bar.close()
    return pd.DataFrame(rows, columns=list(COLUMNS))


def append_row(path: Path, row: dict) -> None:
    """One CSV line (the header first on a new file) as one fsynced append (append_line)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if not path.is_file() or path.stat().st_size == 0:
        w.writerow(COLUMNS)
    w.writerow([json.dumps(row["chunk_timing"]) if k == "chunk_timing" else ("" if row[k] is None else row[k])
                for k in COLUMNS])
    append_line(path, buf.getvalue().encode("utf-8"))


def read_rows(path: Path) -> pd.DataFrame:
    """The measured rows of chunk_timing.csv; a torn last line (killed mid-write) is cut off."""
    if not path.is_file():
        return pd.DataFrame(columns=list(COLUMNS))
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    if end == 0:
        return pd.DataFrame(columns=list(COLUMNS))
    m = pd.read_csv(path, dtype={"id": str, "mode": str})
    m["chunk_timing"] = m["chunk_timing"].map(json.loads)
    return m


def _identity(cfg: dict) -> dict:
    return {k: cfg.get(k) for k in IDENTITY}


def _resumable_rows(cfg: StreamChartConfig, timing_path: Path, cfg_path: Path) -> pd.DataFrame:
    """Rows already measured under the same identity settings; otherwise a fresh, empty file."""
    want = json.loads(json.dumps(dataclasses.asdict(cfg)))
    have = json.loads(cfg_path.read_text()) if cfg_path.is_file() else None
    if have is None or _identity(have) != _identity(want):
        timing_path.unlink(missing_ok=True)  # before the new settings are written: no stale row survives
    if have != want:
        write_json_atomic(cfg_path, want)
    return read_rows(timing_path)


def stalls(measured: pd.DataFrame, rtfs, frame_s: float) -> pd.DataFrame:
    ex = measured[measured["mode"] == "exact"]
    out = []
    for _, r in ex.iterrows():
        for rtf in rtfs:
            out.append({"id": r["id"], "chunk": r["chunk"], "rtf": rtf,
                        **simulate_playback([tuple(x) for x in r["chunk_timing"]], rtf, frame_s)})
    return pd.DataFrame(out)


def _cat_axis(ax, chunks):
    ax.set_xticks(range(len(chunks)), [str(c) for c in chunks])
    ax.set_xlabel("chunk size (frames; first chunk = chunk size; 21.5 frames = 1 s)")


def stall_chart(st: pd.DataFrame, chunks, context, path: Path) -> Path:
    g = st.groupby(["rtf", "chunk"], as_index=False).agg(ttfa_s=("ttfa_s", "median"), gaps=("gaps", "mean"),
                                                          gap_s=("gap_s", "mean"), n=("id", "nunique"))
    fig, axs = new_figure(1, 3, width=14, height=4.3)
    for i, (rtf, d) in enumerate(g.groupby("rtf")):
        st_ = series_style(i)
        x = [list(chunks).index(c) for c in d["chunk"]]
        axs[0, 0].plot(x, 1000 * d["ttfa_s"], label=f"RTF {rtf:g}", **st_)
        axs[0, 1].plot(x, d["gaps"], label=f"RTF {rtf:g}", **st_)
        axs[0, 2].plot(x, 1000 * d["gap_s"], label=f"RTF {rtf:g}", **st_)
    for ax, (title, ylabel) in zip(axs[0], [("Time to first audio", "TTFA (ms, median over utterances)"),
                                            ("Stalls during playback", "gaps per utterance (mean)"),
                                            ("Silence the listener hears", "total gap length (ms per utterance, mean)")]):
        _cat_axis(ax, chunks)
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7, title="generation speed", title_fontsize=7)
    finish(fig, "Chunk size against first audio and stalls, on simulated hardware speeds", context,
           note="RTF = generation seconds per second of audio (0.1 fast GPU .. 0.9 barely real time); codec decode "
                "measured on this machine; one thread generates then decodes each chunk")
    return save_chart(fig, path, g)


def snr_chart(m: pd.DataFrame, chunks, lookbacks, context, path: Path) -> Path:
    m = m.assign(setting=[f"lookback {int(lb)}" if mode == "lookback" else "exact" for mode, lb in zip(m["mode"], m["lookback"])])
    g = m.groupby(["chunk", "setting"], as_index=False).agg(snr_db_min=("snr_db", "min"), snr_db_median=("snr_db", "median"))
    settings = [f"lookback {lb}" for lb in lookbacks] + ["exact"]
    fig, axs = new_figure(width=7.5, height=4.5)
    ax = axs[0, 0]
    for i, c in enumerate(chunks):
        d = g[g["chunk"] == c].set_index("setting").reindex(settings)
        ax.plot(range(len(settings)), d["snr_db_min"], label=f"chunk {c}", **series_style(i))
    ax.set_xticks(range(len(settings)), [s.replace("lookback ", "") for s in settings])
    ax.set_xlabel("lookback (frames of history re-decoded per chunk; exact = decoder state carried)")
    ax.set_ylabel(f"SNR vs one whole decode (dB, worst utterance; {EXACT_SNR_DB:g} = exact)")
    ax.legend(fontsize=7)
    finish(fig, "Chunk-boundary error of streamed decoding against lookback", context,
           note="higher is better; 20 dB = error at 10% of the signal amplitude, 60 dB = 0.1%")
    return save_chart(fig, path, g)


def cost_chart(m: pd.DataFrame, chunks, context, path: Path) -> Path:
    m = m[m["mode"].eq("exact") | m["lookback"].isin([8])]
    m = m.assign(setting=[f"lookback {int(lb)}" if mode == "lookback" else "exact" for mode, lb in zip(m["mode"], m["lookback"])])
    g = m.groupby(["setting", "chunk"], as_index=False).agg(decode_s_per_audio_s=("decode_s_per_audio_s", "median"))
    fig, axs = new_figure(width=7.5, height=4.3)
    ax = axs[0, 0]
    for i, (s, d) in enumerate(g.groupby("setting")):
        ax.plot([list(chunks).index(c) for c in d["chunk"]], d["decode_s_per_audio_s"], label=s, **series_style(i))
    _cat_axis(ax, chunks)
    ax.set_ylabel("codec decode seconds per second of audio (median)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    finish(fig, "Codec cost of streaming against chunk size", context,
           note="measured on this machine; small chunks pay the per-call cost more often, lookback re-decodes history")
    return save_chart(fig, path, g)


def stream_chart(cfg: StreamChartConfig, out: str | Path, engine=None, codec=None) -> Path:
    """Measure (resumable per row: module docstring) and draw the three charts."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if engine is None:
        from gepard_demo.codec import load_codec
        from gepard_demo.model.engine import GepardEngine

        engine = GepardEngine.load(cfg.model, cache_dir=cfg.model_cache)
        codec = load_codec(engine.codec_source())
    timing_path, cfg_path = out / "chunk_timing.csv", out / "stream_chart.json"
    old = _resumable_rows(cfg, timing_path, cfg_path)
    keys = [row_key(*k) for k in zip(old["id"], old["chunk"], old["mode"], old["lookback"])]
    wanted = {row_key(u.id, c, mode, lb) for u in load_set(cfg.set, cfg.limit) for c, mode, lb in _settings(cfg)}
    # rows of other utterances or settings (a larger limit before) stay in the file, not in the charts
    old = old[[k in wanted for k in keys]]
    new = measure(cfg, engine, codec, done=set(keys), write=lambda row: append_row(timing_path, row))
    m = new if old.empty else old if new.empty else pd.concat([old, new], ignore_index=True)
    info = engine.model_info
    context = RunContext(model=info.name, random_weights=info.random_weights, set=Path(cfg.set).name,
                         n=int(m["id"].nunique()), asr=None, device=info.device, date=time.strftime("%Y-%m-%d"))
    frame_s = codec.samples_per_frame / codec.sample_rate
    chunks = list(cfg.chunk_sizes)
    stall_chart(stalls(m, cfg.hardware_rtfs, frame_s), chunks, context, out / "stream_stalls.png")
    snr_chart(m, chunks, list(cfg.lookback_frames), context, out / "boundary_snr.png")
    cost_chart(m, chunks, context, out / "codec_cost.png")
    return out
