"""Markdown report of one run: summary.json in prose and tables, with the charts."""

from __future__ import annotations

import json
from pathlib import Path

from eval.charts.run_charts import write_charts
from eval.charts.style import RunContext
from eval.jsonio import write_bytes_atomic
from eval.report.probe_lines import probe_lines, seeds_lines
from eval.report.summary import write_outputs
from eval.scoring.derail import DerailRule


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ci(d: dict | None) -> str:
    if not d:
        return "n/a"
    counted = f" ({d['k']}/{d['n']})" if "k" in d else ""  # a rate of events: k of n, Wilson interval
    return f"{_pct(d['value'])} [{_pct(d['ci_low'])}, {_pct(d['ci_high'])}]{counted}"


def _mean_ci(d: dict | None) -> str:
    return "n/a" if not d else f"{d['value']:.3f} [{d['ci_low']:.3f}, {d['ci_high']:.3f}]"


def _num(d: dict | None, key: str = "median", fmt: str = "{:.2f}") -> str:
    return "n/a" if not d else fmt.format(d[key])


def _settings_lines(run: dict) -> list[str]:
    """The settings the engine really used: Piper takes none of Gepard's."""
    if run.get("engine") == "piper":
        return ["- Piper (voice en_US-joe-medium) with its noise off (noise_scale = noise_w = 0), so reruns give "
                "the same audio; it takes none of Gepard's sampling, streaming, batch or seed settings"]
    return [f"- sampling `{json.dumps(run.get('sampling'))}`",
            f"- stream `{json.dumps(run.get('stream'))}`, batch size {run.get('batch_size')}, base seed {run.get('base_seed')}"]


def _error_lines(run_dir: Path) -> list[str]:
    from eval.runs.run import error_rows

    errors = error_rows(run_dir)
    if not errors:
        return []
    ids = ", ".join(f"`{e['id']}`" for e in errors[:10]) + (" ..." if len(errors) > 10 else "")
    return [f"- **{len(errors)} utterance(s) refused before synthesis** (not in any figure below; "
            f"`errors.jsonl` says why): {ids}; e.g. {errors[0]['error']}"]


def _weights_lines(run_dir: Path) -> list[str]:
    """A test checkpoint's random weights make noise: every figure then measures the pipeline, not Gepard."""
    if RunContext.from_run(run_dir).random_weights:
        return ["- **Random weights** (a test checkpoint): the audio is noise, so every number below measures "
                "the evaluation pipeline, not Gepard."]
    return []


def render(summary: dict, charts: list[Path], run_dir: Path) -> str:
    cfg = summary.get("run") or {}
    run = cfg.get("run", {})
    o = summary["overall"]
    lines = [
        f"# Evaluation report: {run_dir.name}", "",
        f"- engine `{run.get('engine')}`, model `{run.get('model')}`, set `{run.get('set')}` ({o['n']} utterances)",
        *_weights_lines(run_dir),
        *_settings_lines(run),
        *_error_lines(run_dir),
        f"- ASR: `{summary['asr'] or 'not scored (run `python -m eval score`)'}`; "
        f"CIs: 95% bootstrap, {summary['bootstrap']['replicates']} replicates, seed {summary['bootstrap']['seed']}; "
        "rates of events (k/n): Wilson 95% (with several samples per sentence: the bootstrap over sentences)",
        "", "## Headline", "",
        "| figure | value [95% CI] |", "| --- | --- |",
        f"| **corpus WER** | {_ci(o.get('wer_corpus'))} |",
        f"| mean per-utterance WER | {_ci(o.get('wer_mean'))} |",
        f"| corpus CER | {_ci(o.get('cer_corpus'))} |",
        f"| exact match | {_ci(o.get('exact_match_rate'))} |",
        f"| catastrophic (WER > 0.5) | {_ci(o.get('catastrophic_rate'))} |",
        f"| stop fired | {_ci(o.get('stop_fired_rate'))} |",
        f"| runaway (budget or force stop) | {_ci(o.get('runaway_rate'))} |",
        f"| force stop (runaways the guard caught) | {_ci(o.get('force_stop_rate'))} |",
        f"| derail (probe) | {_ci(o.get('derail_rate'))} |",
        f"| clean rollout (the authors' rule) | {_ci(o.get('clean_rate'))} |",
        f"| reward, mean (the authors' score.py) | {_mean_ci(o.get('reward'))} |",
        f"| truncation (ratio < 0.5) | {_ci(o.get('truncation_rate'))} |",
        f"| overlong (ratio > 2) | {_ci(o.get('overlong_rate'))} |",
        f"| premature stop | {_ci(o.get('premature_stop_rate'))} |",
        f"| duration ratio median (p10, p90) | {_num(o['duration_ratio'])} ({_num(o['duration_ratio'], 'p10')}, {_num(o['duration_ratio'], 'p90')}) |",
        f"| frames per word median (p10, p90) | {_num(o['frames_per_word'])} ({_num(o['frames_per_word'], 'p10')}, {_num(o['frames_per_word'], 'p90')}) |",
        f"| TTFA median s | {_num(o['ttfa_s'], fmt='{:.3f}')} |",
        f"| RTF median | {_num(o['rtf'])} |",
        f"| ASR RTF | {o['asr_rtf']:.3f} |" if "asr_rtf" in o else "| ASR RTF | n/a |",
        "", "## By category", "",
        "| category | n | corpus WER [CI] | mean WER | exact | catastrophic | stop fired | runaway | ratio median |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c, s in summary["by_category"].items():
        rate = lambda k: _pct(s[k]["value"]) if s.get(k) else "n/a"  # noqa: E731
        lines.append(
            f"| {c} | {s['n']} | {_ci(s.get('wer_corpus'))} | {rate('wer_mean')} | {rate('exact_match_rate')} | "
            f"{rate('catastrophic_rate')} | {rate('stop_fired_rate')} | {rate('runaway_rate')} | {_num(s['duration_ratio'])} |"
        )
    lines += _voice_lines(summary.get("by_voice") or {})
    lines += _failure_lines(o)
    lines += probe_lines(summary)
    lines += _measure_lines(o, summary.get("seeds"))
    lines += ["", "## Charts", ""] + [f"![{p.stem}](charts/{p.name})" for p in charts]
    lines += ["", "## Definitions", ""] + [f"- **{k}**: {v}" for k, v in summary["definitions"].items()]
    lines += ["", "Per-utterance data: `table.csv` / `table.parquet`; all numbers: `summary.json`.", ""]
    return "\n".join(lines)


def _voice_lines(voices: dict) -> list[str]:
    """A run in saved voices (--voice): each one's WER and speaker similarity (GE2E, not the authors' WavLM-SV)."""
    if not voices:
        return []
    lines = ["", "## By voice", "",
             "| voice | n | corpus WER [CI] | catastrophic | speaker similarity (GE2E cosine) [CI] |",
             "| --- | --- | --- | --- | --- |"]
    for v, s in voices.items():
        rate = _pct(s["catastrophic_rate"]["value"]) if s.get("catastrophic_rate") else "n/a"
        lines.append(f"| {v} | {s['n']} | {_ci(s.get('wer_corpus'))} | {rate} | {_mean_ci(s.get('speaker_sim'))} |")
    return lines


def _wav_links(ids: list[str], most: int = 12) -> str:
    links = ", ".join(f"[{i}](wav/{i}.wav)" for i in ids[:most])
    return links + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _failure_lines(o: dict) -> list[str]:
    lines = ["", "## Failures", "",
             "Each entry: k of n utterances (n: those it could be judged on), the rate with its Wilson 95% "
             "interval, and the utterances, linked to their audio. Definitions below (`failure_*`).", "",
             "| failure | k / n | rate [95% CI] | utterances |", "| --- | --- | --- | --- |"]
    for name, c in o.get("failures", {}).items():
        rate = "n/a" if not c["n"] else f"{_pct(c['rate'])} [{_pct(c['ci_low'])}, {_pct(c['ci_high'])}]"
        lines.append(f"| {name.replace('_', ' ')} | {c['k']} / {c['n']} | {rate} | {_wav_links(c['ids']) or '-'} |")
    return lines + _where_lines(o)


def _where_lines(o: dict, most: int = 12) -> list[str]:
    """Where in time each listed failure happened (eval/report/where.py), from the word alignment."""
    where = o.get("where") or {}
    if not where:
        return []
    lines = ["", "Where (from each utterance's word alignment: the words heard, timed in its audio):", ""]
    for name, by_id in where.items():
        for uid, line in list(by_id.items())[:most]:
            lines.append(f"- {name.replace('_', ' ')}, [{uid}](wav/{uid}.wav): {line}")
        if len(by_id) > most:
            lines.append(f"- {name.replace('_', ' ')}: and {len(by_id) - most} more (summary.json, `where`)")
    return lines


def _measure_lines(o: dict, seeds: dict | None) -> list[str]:
    lines = []
    if o.get("naturalness"):
        lines += ["", "## Naturalness (DNSMOS; never a ranking figure: a looped clip scores like a clean one)", "",
                  "n: the clips scored, of all utterances (none under 1 s of speech; fewer if this run was "
                  "scored with `--dnsmos off`).", "",
                  "| DNSMOS | mean [95% CI] | n |", "| --- | --- | --- |"]
        lines += [f"| {k.removeprefix('dnsmos_').upper()} | {d['value']:.2f} [{d['ci_low']:.2f}, {d['ci_high']:.2f}] | "
                  f"{d['n']} of {o['n']} |" for k, d in o["naturalness"].items()]
    if o.get("timing"):
        lines += ["", "## Timing and prosody (Silero VAD, SwiftF0)", "", "| figure | median (p10, p90) |", "| --- | --- |"]
        lines += [f"| {k} | {d['median']:.2f} ({d['p10']:.2f}, {d['p90']:.2f}) |" for k, d in o["timing"].items()]
    if o.get("stop_lag_ms"):
        d = o["stop_lag_ms"]
        lines += ["", f"Stop lag (stop time - VAD end of speech): median {d['median']:.0f} ms (p10 {d['p10']:.0f}, "
                      f"p90 {d['p90']:.0f})."]
    if seeds:
        lines += ["", f"## Several samples per sentence ({seeds['samples_per_sentence']} each, {seeds['sentences']} sentences)",
                  "", f"- sentences that fail in every sample: {seeds['always_fail']}, in some: {seeds['sometimes_fail']}, "
                      f"in none: {seeds['never_fail']}; mean per-sentence failure probability {_pct(seeds['p_fail_mean'])}",
                  f"- duration spread across seeds (median per-sentence std): {seeds['duration_spread_s']:.2f} s"]
        lines += seeds_lines(seeds)
    return lines


def make_report(run_dir: str | Path, tag: str | None = None, derail: DerailRule = DerailRule()) -> Path:
    run_dir = Path(run_dir)
    df, summary = write_outputs(run_dir, tag, derail=derail)
    charts = write_charts(run_dir, df, summary, derail)
    path = run_dir / "report.md"
    write_bytes_atomic(path, render(summary, charts, run_dir).encode())
    return path
