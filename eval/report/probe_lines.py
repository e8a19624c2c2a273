"""report.md's sections on derailment: the derail rule in use, the probe's summary, how well the
probe at frame N predicts each outcome, and the token-budget table (summary.json holds the same
numbers: `derail_rule`, `overall.probe`, `probe_prediction`, `token_budget`); and the
several-samples lines on WER and the reward (summary.json `seeds`, eval/report/seeds.py)."""

from __future__ import annotations


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _kn(k, n, rate, low, high) -> str:
    return "-" if not n else f"{k}/{n} {_pct(rate)} [{_pct(low)}, {_pct(high)}]"


def probe_lines(summary: dict) -> list[str]:
    o = summary["overall"]
    rule = summary.get("derail_rule") or {}
    lines = ["", "## Derailment: the onset-entropy probe", "",
             f"- derail rule: {rule.get('rule', 'n/a')}; set with `--derail-fraction`, `--derail-from`, "
             "`--derail-window`, `--derail-onset`"]
    for name, d in (o.get("probe") or {}).items():
        lines.append(f"- {name.replace('_', ' ')} (nats): median {d['median']:.3f} (p10 {d['p10']:.3f}, p90 {d['p90']:.3f})")
    pred = summary.get("probe_prediction") or []
    if pred:
        lines += ["", "Flagged by frame N against the outcome (k/n, Wilson 95%): precision = flagged rows that had "
                      "it, recall = rows that had it that were flagged. Act on an early stop only where precision "
                      "is high enough.", "",
                  "| frame N | outcome | rows | flagged | precision | recall |", "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {p['frame']} | {p['outcome'].replace('_', ' ')} | {p['n']} | {p['flagged']} | "
                  f"{_kn(p['tp'], p['flagged'], p['precision'], p['precision_low'], p['precision_high'])} | "
                  f"{_kn(p['tp'], p['had_outcome'], p['recall'], p['recall_low'], p['recall_high'])} |" for p in pred]
    else:
        lines += ["", "No probe prediction table: no row has a probe trace, or no row had an outcome to predict."]
    budget = summary.get("token_budget") or []
    if budget:
        measures = list(dict.fromkeys(b["measure"] for b in budget))
        by_bin: dict[str, dict] = {}
        for b in budget:
            by_bin.setdefault(b["tokens"], {})[b["measure"]] = b
        lines += ["", "## Token budget (failures against text length, MODEL_GUIDE §5.3)", "",
                  "Tokens: the text once, before the prompt repeats it; k/n with Wilson 95%.", "",
                  "| tokens | " + " | ".join(measures) + " |", "| --- |" + " --- |" * len(measures)]
        for tokens, ms in by_bin.items():
            cells = [_kn(*(ms[m][k] for k in ("k", "n", "rate", "ci_low", "ci_high"))) if m in ms else "-" for m in measures]
            lines.append(f"| {tokens} | " + " | ".join(cells) + " |")
    return lines


def _ci(d: dict | None) -> str:
    return "n/a" if not d else f"{_pct(d['value'])} [{_pct(d['ci_low'])}, {_pct(d['ci_high'])}]"


def seeds_lines(seeds: dict) -> list[str]:
    k = seeds["samples_per_sentence"]
    lines = []
    if seeds.get("wer_single_sample"):
        lines.append(f"- corpus WER, one sample: {_ci(seeds['wer_single_sample'])}; best of {k} (fewest errors, needs "
                     f"the reference): {_ci(seeds['wer_best_of_k'])}"
                     + (f"; best of {k} by reward: {_ci(seeds['wer_best_by_reward'])}" if seeds.get("wer_best_by_reward") else ""))
        lines.append(f"- per-sentence WER across seeds, averaged over sentences: oracle (minimum) {_pct(seeds['oracle_wer'])}, "
                     f"mean {_pct(seeds['mean_wer'])}")
    if seeds.get("reward_best") is not None:
        c = seeds["any_clean"]
        lines.append(f"- the authors' reward per sentence, averaged: best of {k} {seeds['reward_best']:.3f}, mean "
                     f"{seeds['reward_mean']:.3f}; sentences with at least one clean sample: {c['k']}/{c['n']} "
                     f"{_pct(c['rate'])} [{_pct(c['ci_low'])}, {_pct(c['ci_high'])}]")
    lines += ["", "| sentence | samples | failure probability | mean WER | oracle WER | best reward |",
              "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {w['sentence']} | {w['samples']:.0f} | {_pct(w['p_fail'])} | {_pct(w['wer_mean'])} | {_pct(w['wer_min'])} | "
              f"{'n/a' if w.get('reward_best') is None else format(w['reward_best'], '.3f')} |" for w in seeds["worst"]]
    return lines
