"""A load run's folder for a person and a CI.

- rows.jsonl: every request, with its point, as it ended (RequestRow, plus "point");
- points/<label>.json: one point's summary in the layout of `vllm bench serve --save-result`;
- summary.json: every point's summary, the gate's verdict and whether the run was interrupted;
- report.md: a table of the points, their failures, the gate;
- knee.png (+ knee.csv): audio_ttfp p50 / p95, audio_rtf p50 and continuity against the load.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from eval.charts.style import finish, new_figure, save_chart, series_style
from eval.jsonio import replace_atomic, write_json_atomic
from eval.load.metrics import p_word


def point_file(out: Path, label: str) -> Path:
    return out / "points" / (label.replace(", ", "_").replace(" ", "-") + ".json")


def _mid(percentiles) -> str:
    """The percentile the tables call the tail: 95 when measured, else the highest."""
    return "95" if 95.0 in percentiles else p_word(max(percentiles))


def markdown(summaries: list[dict], breaches: list[str] | None, interrupted: str | None) -> str:
    """The report: one row a point, then failures and the gate."""
    if not summaries:
        return "# Load run\n\nNo point was measured.\n" + (f"\n{interrupted}\n" if interrupted else "")
    first = summaries[0]
    q = _mid(first["percentiles"])
    lines = ["# Load run", "",
             f"Server(s): {', '.join(first['servers'])} ({first['model_id']}, "
             f"{' / '.join(str(r) for r in first['sample_rate']) or 'no audio'} Hz, "
             "as the server says). Requests as `vllm bench serve --omni --backend openai-audio-speech` sends them "
             "(stream=true, stream_format=audio, response_format=pcm); figures under its names.", ""]
    if interrupted:
        lines += [f"**{interrupted}**", ""]
    lines += [f"| point | done / failed | audio_ttfp p50 / p{q} | e2el p50 | audio_rtf p50 | underrun p50 / p{q} | "
              "continuity OK | audio throughput | goodput |",
              "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    for s in summaries:
        goodput = "-" if s["request_goodput"] is None else f"{s['request_goodput']:.2f} req/s"
        lines.append(f"| {s['label']} | {s['completed']} / {s['failed']} | {s['median_audio_ttfp_ms']:.0f} / "
                     f"{s[f'p{q}_audio_ttfp_ms']:.0f} ms | {s['median_e2el_ms'] / 1000:.2f} s | {s['median_audio_rtf']:.3f} | "
                     f"{s['median_audio_underrun_s']:.2f} / {s[f'p{q}_audio_underrun_s']:.2f} s | "
                     f"{s['audio_continuity_ok_rate']:.0%} | {s['audio_throughput']:.2f} s/s | {goodput} |")
    lines += ["", "audio_ttfp: first audio bytes after the request was sent. audio_rtf: e2el / audio seconds. "
              "underrun: the worst starvation of a player that starts at the first chunk and plays in real time; "
              "continuity OK: that underrun <= 0.1 s. audio throughput: audio seconds made per second of the run."]
    if first["goodput"]:
        lines.append("goodput: requests per second within " + ", ".join(f"{k} <= {v:g} ms" for k, v in first["goodput"].items()) + ".")
    failures = [(s["label"], reason, n) for s in summaries for reason, n in s["failed_reasons"].items()]
    if failures:
        lines += ["", "## Failed requests", "", "| point | reason | requests |", "| --- | --- | ---: |"]
        lines += [f"| {label} | {reason.replace('|', '/')} | {n} |" for label, reason, n in failures]
    if breaches is not None:
        lines += ["", "## Gate", ""]
        lines += [f"- {b}" for b in breaches] if breaches else ["Every bound holds."]
    return "\n".join(lines) + "\n"


def knee_chart(summaries: list[dict], path: Path) -> Path | None:
    """The figures against the load (concurrency, else rate); None with fewer than two points."""
    if len(summaries) < 2:
        return None
    by_rate = all(s["max_concurrency"] is None for s in summaries)
    x_name = "request rate (req/s)" if by_rate else "concurrency"
    x = [s["request_rate"] if by_rate else s["max_concurrency"] for s in summaries]
    q = _mid(summaries[0]["percentiles"])
    data = pd.DataFrame({x_name: x,
                         "audio_ttfp_p50_ms": [s["median_audio_ttfp_ms"] for s in summaries],
                         f"audio_ttfp_p{q}_ms": [s[f"p{q}_audio_ttfp_ms"] for s in summaries],
                         "audio_rtf_p50": [s["median_audio_rtf"] for s in summaries],
                         "continuity_ok_rate": [s["audio_continuity_ok_rate"] for s in summaries]})
    fig, axes = new_figure(1, 3, width=11.0, height=3.6)
    ttfp, rtf, cont = axes[0]
    ttfp.plot(x, data["audio_ttfp_p50_ms"], label="p50", **series_style(0))
    ttfp.plot(x, data[f"audio_ttfp_p{q}_ms"], label=f"p{q}", **series_style(1))
    ttfp.set(xlabel=x_name, ylabel="ms", title="First audio (audio_ttfp)")
    ttfp.legend()
    rtf.plot(x, data["audio_rtf_p50"], **series_style(2))
    rtf.axhline(1.0, color="#999999", linestyle="--", linewidth=0.8)
    rtf.set(xlabel=x_name, ylabel="e2el / audio seconds", title="audio_rtf p50 (1 = real time)",
            ylim=(0, max(1.1, 1.1 * max(data["audio_rtf_p50"]))))
    cont.plot(x, [100 * v for v in data["continuity_ok_rate"]], **series_style(3))
    cont.set(xlabel=x_name, ylabel="% of requests", ylim=(0, 105), title="Continuity OK (underrun <= 0.1 s)")
    for ax in axes[0]:
        if not by_rate:
            ax.set_xscale("log", base=2)
            ax.set_xticks(x, [str(v) for v in x])
    first = summaries[0]
    finish(fig, "Where the server's load knee is", f"{first['model_id']} at {', '.join(first['servers'])} | "
           f"{first['num_prompts']} requests a point | {first['date']}",
           "Each point ran alone, one after another; a closed loop keeps `concurrency` requests in flight.")
    return save_chart(fig, path, data)


def write_folder(out: Path, summaries: list[dict], breaches: list[str] | None, interrupted: str | None) -> Path:
    """summary.json, each point's JSON, report.md and the knee chart; the report's path."""
    for s in summaries:
        point_file(out, s["label"]).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(point_file(out, s["label"]), s)
    write_json_atomic(out / "summary.json", {"points": summaries, "gate_breaches": breaches,
                                             "interrupted": interrupted})
    knee_chart(summaries, out / "knee.png")
    report = out / "report.md"
    replace_atomic(report, lambda tmp: Path(tmp).write_text(markdown(summaries, breaches, interrupted), encoding="utf-8"))
    return report
