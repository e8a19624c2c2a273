"""Turn a finished session into the stats table the page shows (the p_stop plot: pstop_plot.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gepard_demo.settings import SamplingSettings, force_stop_text
from gepard_demo.streaming.session import SynthesisStats
from gepard_demo.units import Json

if TYPE_CHECKING:
    from gepard_demo.ui.takes import Take


def _fmt(x: float | None, unit: str = "", digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}f}{unit}"


def _probe_line(stats: SynthesisStats) -> str:
    """The onset-entropy probe's summary: a clean run's entropy drops within ~50 frames."""
    p = stats.probe()
    if p["entropy_onset"] is None:
        return "– (fewer than 10 frames)"
    line = f"frames 0-9: {p['entropy_onset']:.3f} nats"
    if p["entropy_settled"] is None:
        return line + " · frames 40-59: – (the run is shorter)"
    return line + f" · frames 40-59: {p['entropy_settled']:.3f} · drop {p['entropy_drop']:+.3f}"


def stats_markdown(stats: SynthesisStats, sampling: SamplingSettings) -> str:
    if stats.cancelled:
        ending = "stopped by the user"
    elif stats.stop_fired:
        ending = f"stop head fired after frame {stats.stop_frame}"
    elif stats.force_stopped:
        ending = ("**force-stopped** (a runaway the guard caught): force_stop_frames "
                  f"{force_stop_text(sampling.force_stop_frames)} reached before the stop head fired")
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
        ("belief entropy (probe)", _probe_line(stats)),
    ]
    if stats.speed:
        rows.append(("speed path", stats.speed))
    if stats.speaker_sim is not None:
        rows.append(("speaker similarity", f"{stats.speaker_sim:.3f} (GE2E cosine of the reference voice and the "
                                           "audio; not the authors' WavLM-SV; random weights: noise)"))
    if stats.text_waits_s:  # the text written as it came: what each sentence waited for its audio
        waits = sorted(stats.text_waits_s)
        rows.append(("text as written", f"{len(waits)} sentences; from each one's last word to its first audio "
                                        f"(server): median {waits[len(waits) // 2]:.2f} s, longest {waits[-1]:.2f} s"))
    if stats.gpu_asks_s:  # behind ZeroGPU: each call asks the visitor's quota for its own part
        calls = len(stats.gpu_asks_s)
        rows.append(("GPU calls", f"{calls} ({' + '.join(f'{a} s' for a in stats.gpu_asks_s)} asked; "
                                  "the quota is charged for the time used)"))
    body = "\n".join(f"| {k} | {v} |" for k, v in rows)
    return "| stat | value |\n| --- | --- |\n" + body


def speak_summary(job_id: str, status: str, take: Take | None) -> dict[str, Json]:
    """/speak's JSON beside its WAV: the job, the status line, and what the run did (none when it
    was stopped before it started)."""
    out: dict[str, Json] = {"job_id": job_id, "status": status}
    if take is None:
        return out
    st = take.stats
    return {**out, "seed": st.get("seed"), "frames": st.get("frames"), "audio_s": st.get("audio_s"),
            "ttfa_s": st.get("ttfa_s"), "rtf": st.get("rtf"), "ended": take.ended(), "model": take.model}
