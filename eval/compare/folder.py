"""A comparison folder: compare.md, compare.json and its charts, for one base and one or more runs.

- compare.md: per run, the notes (what was left out and why), the gate's verdict and each breach,
  every measure overall (base, new, delta and its 95% interval; McNemar's counts for the failure
  entries), the per-category table of the gated (or headline) measures, and the utterances that
  got worse, worst first, each with both WAVs linked and both runs' words (word_diff.py); with
  several runs, first one table of every
  measure side by side against the base;
- compare.json: all of it, and every measure's definition;
- forest.png / .csv: per category, the corpus WER delta and its interval (one row per category,
  one colour per run); failures.png / .csv: each failure entry's rate delta with its interval.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from eval.charts.style import finish, new_figure, save_chart, series_style
from eval.jsonio import write_bytes_atomic, write_json_atomic

from .gate import Breach, Gate, check
from .table import ALL, MEASURES, Comparison, fmt
from .word_diff import word_diff_lines

# The failure-table entries (higher is worse); the clean-rollout rate, a rate where lower is worse, is not one.
FAILURES = [name for name, m in MEASURES.items() if m.kind == "rate" and m.worse > 0]


def compare_into(out: str | Path, base: str | Path, news: list[str | Path], gate: Gate | None = None,
                 tag: str | None = None, derail=None) -> tuple[list[Comparison], dict]:
    """Every run of `news` against `base`, written as a comparison folder at `out` (the command and
    the Eval tab both): (the comparisons, write_folder's answer). derail: the derail rule
    (eval/scoring/derail.py; None: its defaults)."""
    from .table import compare_runs

    comparisons = [compare_runs(base, new, tag, **({"derail": derail} if derail else {})) for new in news]
    return comparisons, write_folder(out, comparisons, gate)


def write_folder(out: str | Path, comparisons: list[Comparison], gate: Gate | None = None) -> dict:
    """Writes the folder; returns {"breaches": {new: [lines]}, "files": [...]}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    breaches = {c.new: check(gate, c) if gate is not None else [] for c in comparisons}
    files = [forest_chart(out / "forest.png", comparisons), failures_chart(out / "failures.png", comparisons)]
    write_bytes_atomic(out / "compare.md", markdown(comparisons, breaches, gate, out).encode("utf-8"))
    write_json_atomic(out / "compare.json", {
        "base": comparisons[0].base, "runs": [c.as_dict() for c in comparisons],
        "gate": gate.limits if gate is not None else None,
        "breaches": {new: [b.__dict__ | {"line": b.line()} for b in bs] for new, bs in breaches.items()}})
    return {"breaches": {new: [b.line() for b in bs] for new, bs in breaches.items()},
            "files": [str(out / "compare.md"), str(out / "compare.json"), *map(str, files)]}


def _cell(m, d) -> str:
    if d is None:
        return "–"
    return f"{_signed(m, d.delta)} [{_signed(m, d.low)}, {_signed(m, d.high)}]"


def _signed(m, v: float) -> str:
    return ("+" if v >= 0 else "-") + fmt(m, abs(v))


def markdown(comparisons: list[Comparison], breaches: dict[str, list[Breach]], gate: Gate | None, out: Path) -> str:
    base = comparisons[0].base
    lines = [f"# Comparison against {base}", "",
             "Every delta is new - base over the pairs both runs scored (same sentence, seed and normalised "
             "reference), with its 95% interval: a paired bootstrap over sentences for WER and the means, Newcombe's "
             "paired interval for the failure rates (`worse`/`better`: pairs failing only in the new / only in the "
             "base run, McNemar). Definitions: compare.json.", ""]
    if len(comparisons) > 1:
        lines += ["## Every run against the base (overall)", "",
                  "| measure | base | " + " | ".join(Path(c.new).name for c in comparisons) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in comparisons) + " |"]
        for name, m in MEASURES.items():
            ds = [c.deltas[ALL].get(name) for c in comparisons]
            first = next((d for d in ds if d is not None), None)
            if first is None:
                continue
            lines.append(f"| {name} | {fmt(m, first.base)} | " + " | ".join(_cell(m, d) for d in ds) + " |")
        lines.append("")
    for c in comparisons:
        lines += _one(c, breaches[c.new], gate, out)
    lines += ["![per-category corpus WER deltas](forest.png)", "", "![failure-rate deltas](failures.png)", ""]
    return "\n".join(lines)


def _one(c: Comparison, breaches: list[Breach], gate: Gate | None, out: Path) -> list[str]:
    lines = [f"## {c.new}", "", f"ASR {c.tag}; {c.pairs} pairs; categories: {', '.join(c.categories) or 'none'}."]
    lines += [f"- note: {n}" for n in c.notes]
    if gate is not None:
        verdict = f"**{len(breaches)} breach(es) of the gate**" if breaches else "**the gate passes**"
        lines += ["", verdict] + [f"- {b.line()}" for b in breaches]
    lines += ["", "| measure | base | new | delta [95%] | worse / better |", "| --- | --- | --- | --- | --- |"]
    for name, d in c.deltas[ALL].items():
        m = MEASURES[name]
        counts = f"{d.worse} / {d.better} (p {d.p:.3g})" if d.worse is not None else ""
        lines.append(f"| {name} | {fmt(m, d.base)} | {fmt(m, d.new)} | {_cell(m, d)} | {counts} |")
    shown = sorted({n for lim in (gate.limits.values() if gate else []) for n in lim} or {"corpus_wer", "any"})
    lines += ["", "Per category:", "", "| category | n | " + " | ".join(shown) + " |",
              "| --- | --- | " + " | ".join("---" for _ in shown) + " |"]
    for cat, ds in c.deltas.items():
        if cat == ALL:
            continue
        n = next(iter(ds.values())).n if ds else 0
        lines.append(f"| {cat} | {n} | " + " | ".join(_cell(MEASURES[s], ds.get(s)) for s in shown) + " |")
    if c.voices:  # runs in saved voices: each voice's pairs, its speaker similarity first
        by_voice = ["speaker_sim", *(s for s in shown if s != "speaker_sim")]
        lines += ["", "Per voice:", "", "| voice | n | " + " | ".join(by_voice) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in by_voice) + " |"]
        for v, ds in c.voice_deltas.items():
            n = next(iter(ds.values())).n if ds else 0
            lines.append(f"| {v} | {n} | " + " | ".join(_cell(MEASURES[s], ds.get(s)) for s in by_voice) + " |")
    if c.worse_utterances:
        lines += ["", "Worse in the new run (worst first):", "", "| id | category | WER base -> new | new failures | base | new |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for w in c.worse_utterances:
            link = lambda p: f"[wav]({os.path.relpath(p, out)})"  # noqa: E731
            lines.append(f"| {w['id']} | {w['category']} | {w['wer_base']:.2f} -> {w['wer_new']:.2f} | "
                         f"{', '.join(w['new_failures']) or '–'} | {link(w['wav_base'])} | {link(w['wav_new'])} |")
        lines += word_diff_lines(c)  # base's and new's words of each, every error placed in time
    return lines + [""]


def _context(comparisons: list[Comparison]) -> str:
    c = comparisons[0]
    return f"base run {Path(c.base).name} | ASR {c.tag} | {c.pairs} pairs (same sentence and seed)"


def _deltas_plot(ax, comparisons: list[Comparison], rows: list[dict], key: str, labels: list[str]) -> None:
    """One row of points a label (a category, a failure entry), one series a new run, each point
    its delta with its 95% interval, in points (x100)."""
    for i, c in enumerate(comparisons):
        pts = [r for r in rows if r["run"] == Path(c.new).name]
        ys = [labels.index(r[key]) + 0.18 * (i - (len(comparisons) - 1) / 2) for r in pts]
        err = [[100 * (r["delta"] - r["low"]) for r in pts], [100 * (r["high"] - r["delta"]) for r in pts]]
        ax.errorbar([100 * r["delta"] for r in pts], ys, xerr=err, linestyle="none", capsize=2,
                    label=Path(c.new).name, **series_style(i))
    ax.axvline(0, color="#444444", linewidth=0.8)
    ax.set_yticks(range(len(labels)), ["overall" if x == ALL else x for x in labels])
    ax.invert_yaxis()
    if len(comparisons) > 1:
        ax.legend(fontsize=7)


def forest_chart(path: Path, comparisons: list[Comparison], measure: str = "corpus_wer") -> Path:
    cats = [ALL, *sorted({cat for c in comparisons for cat in c.categories})]
    rows = [{"run": Path(c.new).name, "category": cat, **c.deltas[cat][measure].as_dict()}
            for c in comparisons for cat in cats if cat in c.deltas and measure in c.deltas[cat]]
    fig, axes = new_figure(1, 1, width=7.0, height=1.2 + 0.32 * len(cats) * max(1, len(comparisons)))
    ax = axes[0][0]
    _deltas_plot(ax, comparisons, rows, "category", cats)
    ax.set_xlabel("corpus WER, new - base (points), 95% interval")
    finish(fig, "Where the WER changed: each category", _context(comparisons),
           "Right of 0 is worse. An interval that crosses 0 is a change the sentences cannot tell from noise.")
    return save_chart(fig, path, pd.DataFrame(rows))


def failures_chart(path: Path, comparisons: list[Comparison]) -> Path:
    rows = [{"run": Path(c.new).name, "entry": e, **c.deltas[ALL][e].as_dict()}
            for c in comparisons for e in FAILURES if e in c.deltas[ALL]]
    entries = [e for e in FAILURES if any(r["entry"] == e for r in rows)]
    fig, axes = new_figure(1, 1, width=7.0, height=1.2 + 0.3 * len(entries) * max(1, len(comparisons)))
    ax = axes[0][0]
    _deltas_plot(ax, comparisons, rows, "entry", entries)
    ax.set_xlabel("failure rate, new - base (percentage points), Newcombe's paired 95% interval")
    finish(fig, "How often each failure happened: the change", _context(comparisons),
           "Right of 0: the new run fails that way more often.")
    return save_chart(fig, path, pd.DataFrame(rows))
