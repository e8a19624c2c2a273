"""Turn a finished session into what the page shows: a stats table and the p_stop plot."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # server side, no display; set before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402

from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.streaming.session import SynthesisStats  # noqa: E402


def _fmt(x: float | None, unit: str = "", digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}{unit}"


def stats_markdown(stats: SynthesisStats, sampling: SamplingSettings) -> str:
    if stats.cancelled:
        ending = "stopped by the user"
    elif stats.stop_fired:
        ending = f"stop head fired after frame {stats.stop_frame}"
    elif stats.runaway:
        per = " per text segment" if stats.segments > 1 else ""
        ending = f"**runaway**: frame budget ({sampling.max_frames}{per}) reached, the stop head never fired"
    else:
        ending = "–"
    rows = [
        ("ended", ending),
        ("seed used", f"`{stats.seed}`"),
        ("frames", str(stats.frames) + (f" (budget {sampling.max_frames} per text segment, "
                                          f"{stats.segments} segments)" if stats.segments > 1 else "")),
        ("audio", _fmt(stats.audio_s, " s", 2) + f" (speech {_fmt(stats.speech_s, ' s', 2)})"),
        ("time to first audio (server)", _fmt(stats.ttfa_s and stats.ttfa_s * 1000, " ms", 0)),
        ("real-time factor", _fmt(stats.rtf, "", 3) + " (wall / speech; < 1 is faster than real time)"),
        ("generation time", _fmt(stats.gen_time_s, " s", 2)),
        ("decode time", _fmt(stats.decode_time_s, " s", 2)),
        ("wall time", _fmt(stats.wall_s, " s", 2)),
        ("chunks", str(stats.chunks) + (f" · {stats.segments} text segments" if stats.segments > 1 else "")),
    ]
    if stats.speed:
        rows.append(("speed path", stats.speed))
    body = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return "| stat | value |\n| --- | --- |\n" + body


def p_stop_figure(stats: SynthesisStats, threshold: float):
    """p_stop per decode step, the threshold, and where the stop fired (or the budget hit)."""
    fig, ax = plt.subplots(figsize=(7, 2.8), dpi=100)
    steps = list(range(len(stats.p_stop)))
    ax.plot(steps, stats.p_stop, lw=1.2, color="#1f77b4", label="p_stop")
    ax.axhline(threshold, color="#d62728", ls="--", lw=1, label=f"threshold {threshold:g}")
    if stats.stop_fired and stats.stop_frame is not None:
        ax.axvline(stats.stop_frame, color="#2ca02c", lw=1, label=f"stop at step {stats.stop_frame}")
    ax.set_xlabel("decode step (frame)")
    ax.set_ylabel("p_stop")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(0, max(1, len(steps) - 1))
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title("Stop-head probability per step", fontsize=10)
    fig.tight_layout()
    plt.close(fig)  # gr.Plot renders it; keep pyplot's global figure list empty
    return fig
