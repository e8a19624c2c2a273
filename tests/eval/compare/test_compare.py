"""`python -m eval compare` on hand-made scored runs: paired deltas overall and per category and
per failure entry, the statistics behind them checked against their definitions, the gate file
and its breaches, the comparison folder (each chart row and table row carrying its own category's
or entry's numbers, read from what the charts draw), several runs against one base, and what
cannot be compared."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.support.eval_fixtures import fake_run

from eval.cli import main
from eval.compare import folder
from eval.compare.gate import Gate, GateError, check
from eval.compare.paired import Delta, mcnemar_p, mean_delta, newcombe_paired, rate_delta, ratio_delta
from eval.compare.table import ALL, Comparison, compare_runs

REPO = Path(__file__).resolve().parents[3]
WORDS = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"
TEXTS = [f"the quick brown fox number {w} jumps over the lazy dog take {i}" for i, w in enumerate(WORDS.split() * 3)]
CATS = [{"category": "casual" if i % 2 else "urls"} for i in range(len(TEXTS))]


def _worse(texts, every: int, drop: int = 3):
    """Every `every`-th hypothesis loses its last `drop` words."""
    return [" ".join(t.split()[:-drop]) if i % every == 0 else t for i, t in enumerate(texts)]


@pytest.fixture()
def runs(tmp_path):
    base = fake_run(tmp_path / "base", TEXTS, _worse(TEXTS, 10), extra=CATS, wavs=True)
    same = fake_run(tmp_path / "same", TEXTS, _worse(TEXTS, 10), extra=CATS, wavs=True)
    # Worse in the "casual" category only (odd ids): its 30 utterances lose 8 words each; the rest as the base.
    hyps = [" ".join(t.split()[:-8]) if i % 2 else h for i, (t, h) in enumerate(zip(TEXTS, _worse(TEXTS, 10)))]
    casual = fake_run(tmp_path / "casual", TEXTS, hyps, extra=CATS, wavs=True)
    better = fake_run(tmp_path / "better", TEXTS, TEXTS, extra=CATS, wavs=True)
    return base, same, casual, better


def test_newcombe_and_mcnemar_follow_their_definitions():
    assert mcnemar_p(10, 2) == pytest.approx(2 * (1 + 12 + 66) / 4096)
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(5, 5) == 1.0
    low, high = newcombe_paired(both=5, base_only=0, new_only=0, neither=45)  # nothing changed
    assert low < 0 < high and high - low < 0.15
    # Coverage: pairs with base rate 0.2 and new rate 0.3 (correlated), 60 pairs: the 95% interval
    # holds the true difference about 95% of the time (Newcombe's method 10 is a little conservative).
    rng, hits, truth = np.random.default_rng(0), 0, 0.1
    for _ in range(1500):
        u = rng.random(60)
        a, b = u < 0.2, (u < 0.2) | ((u >= 0.2) & (u < 0.3))  # b fails wherever a does, and 10% more
        lo, hi = newcombe_paired(int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum()), int((~a & ~b).sum()))
        hits += lo <= truth <= hi
    assert 0.93 <= hits / 1500 <= 0.995, hits / 1500
    d = rate_delta([False] * 40, [True] * 4 + [False] * 36, np.arange(40))
    assert d.worse == 4 and d.better == 0 and d.delta == pytest.approx(0.1) and d.low < 0 < d.high and d.p == 0.125
    d = rate_delta([False] * 40, [True] * 8 + [False] * 32, np.arange(40))  # 8 new failures of 40: significant
    assert d.low > 0 and d.p == pytest.approx(2 / 2**8)


def test_a_sentences_samples_are_resampled_together():
    """Two samples of each sentence: the bootstrap's unit is the sentence, so a difference seen in
    only a few sentences gets the wide interval its few sentences support."""
    errors_a, errors_b, n_ref = np.zeros(40), np.r_[np.full(4, 5.0), np.zeros(36)], np.full(40, 10.0)
    by_row = ratio_delta(errors_a, n_ref, errors_b, n_ref, np.arange(40))
    by_sentence = ratio_delta(errors_a, n_ref, errors_b, n_ref, np.arange(40) // 2)  # rows 0-3 are 2 sentences
    assert by_row.delta == by_sentence.delta == pytest.approx(20 / 400)
    assert by_sentence.low < by_row.low  # fewer independent units: a wider interval


def test_a_mean_deltas_interval_has_the_width_its_sentences_give():
    """100 pairs, the new run 1 higher in every other one: +0.5, and per pair a difference of sd 0.5,
    so the bootstrap's 95% interval is +-1.96 x 0.5 / sqrt(100) by hand. Two samples a sentence that
    differ within it (one 0, one 1) leave every sentence's mean at 0.5: no width at all; two that
    agree make 50 independent units, sqrt(2) wider. A failure rate with several samples a sentence
    takes the same interval."""
    a, b = np.zeros(100), np.arange(100) % 2.0
    by_hand = 1.96 * 0.5 / np.sqrt(100)
    for clusters, width in ((np.arange(100), by_hand), (np.arange(100) // 2, 0.0),
                            (np.arange(100) % 50, by_hand * np.sqrt(2))):  # row i and i + 50: the same parity
        d = mean_delta(a, b, clusters)
        assert d.delta == pytest.approx(0.5) and d.low <= 0.5 <= d.high
        assert (d.high - d.low) / 2 == pytest.approx(width, abs=0.12 * by_hand), (clusters[:4], d)
    r = rate_delta(a.astype(bool), b.astype(bool), np.arange(100) % 50)
    assert r.delta == pytest.approx(0.5) and (r.high - r.low) / 2 == pytest.approx(by_hand * np.sqrt(2), abs=0.12 * by_hand)


def test_deltas_per_category_and_per_failure(runs):
    base, same, casual, better = runs
    assert compare_runs(base, same).deltas[ALL]["corpus_wer"].delta == 0
    c = compare_runs(base, casual)
    assert c.pairs == len(TEXTS) and c.categories == ["casual", "urls"] and not c.notes
    wer = {cat: c.deltas[cat]["corpus_wer"] for cat in c.categories}
    assert wer["casual"].low > 0.2 and wer["urls"].delta == 0  # the regression is where it is, not smeared
    assert c.deltas[ALL]["corpus_wer"].delta == pytest.approx(wer["casual"].delta / 2, rel=0.02)
    cat = c.deltas["casual"]["catastrophic"]  # 8 of 13 words lost: WER 0.62 > 0.5, in every casual pair
    assert cat.worse == 30 and cat.better == 0 and cat.low > 0.8 and cat.p < 1e-6
    assert c.deltas[ALL]["mean_wer"].delta > 0
    worst = c.worse_utterances
    assert worst and all(w["category"] == "casual" for w in worst) and worst[0]["new_failures"] == ["catastrophic"]
    assert compare_runs(base, better).deltas[ALL]["corpus_wer"].high < 0


def test_the_gate_file_names_each_breach(runs, tmp_path, capsys):
    base, same, casual, _ = runs
    gate = tmp_path / "gate.yaml"
    gate.write_text("overall:\n  corpus_wer: 0.5\ncategories:\n  '*':\n    corpus_wer: 0.01\n  urls:\n    catastrophic: 0\n")
    assert main(["compare", str(base), str(same), "--gate", str(gate)]) == 0
    assert main(["compare", str(base), str(casual), "--gate", str(gate), "--out", str(tmp_path / "cmp")]) == 1
    err = capsys.readouterr().err
    assert "category casual: corpus_wer rose by +" in err and "more than the 1.00% allowed" in err
    assert "category urls" not in err and "overall" not in err  # 0.5 overall is not breached
    c = compare_runs(base, casual)
    assert [b.category for b in check(Gate.load(gate), c)] == ["casual"]
    for text, named in (("overall:\n  wer: 0.01\n", "unknown measure 'wer'"),
                        ("categories:\n  nowhere:\n    corpus_wer: 0.01\n", "category 'nowhere'"),
                        ("overall:\n  corpus_wer: -1\n", "must be a number >= 0"),
                        ("overall:\n  dnsmos_ovrl: 0.1\n", "do not measure"),
                        ("limits: {}\n", "keys are 'overall', 'categories' and 'voices'")):
        gate.write_text(text)
        assert main(["compare", str(base), str(casual), "--gate", str(gate)]) == 2
        assert named in capsys.readouterr().err
    with pytest.raises(GateError):
        check(Gate.parse({"categories": {"x": {"loop": 0}}}), c)


def test_the_gate_judges_the_intervals_better_end_not_the_point():
    """Hand-made deltas on each side of a limit: a measure breaches only when the end of its interval
    on the better side is past the limit: the low end for WER (higher is worse), the high end for
    DNSMOS (lower is worse), the end nearer 0 for F0 (no side is worse; an interval across 0 never,
    however wide); a better end exactly at the limit is not past it."""
    def d(delta, low, high):
        return Delta(0.0, delta, delta, low, high, 50)

    cases = {  # measure: (limit, {name: (delta, low, high, breaches?)})
        "corpus_wer": (0.02, {"noisy": (0.05, -0.01, 0.11, False), "clear": (0.05, 0.03, 0.07, True),
                              "at": (0.04, 0.02, 0.06, False)}),
        "dnsmos_ovrl": (0.1, {"noisy": (-0.3, -0.65, 0.05, False), "clear": (-0.4, -0.6, -0.2, True)}),
        "f0_median_hz": (10.0, {"down": (-20.0, -30.0, -12.0, True), "up": (20.0, 12.0, 30.0, True),
                                "across": (-20.0, -45.0, 15.0, False), "near": (20.0, 8.0, 32.0, False)}),
    }
    for measure, (limit, deltas) in cases.items():
        comparison = Comparison("b", "n", "t", 50, list(deltas), {ALL: {}, **{c: {measure: d(*v[:3])} for c, v in deltas.items()}})
        breaches = check(Gate.parse({"categories": {"*": {measure: limit}}}), comparison)
        assert sorted(b.category for b in breaches) == sorted(c for c, v in deltas.items() if v[3]), measure


def test_the_comparison_folder(runs, tmp_path):
    base, _, casual, better = runs
    out = tmp_path / "cmp"
    assert main(["compare", str(base), str(casual), str(better), "--out", str(out), "--json", str(tmp_path / "c.json")]) == 1
    md = (out / "compare.md").read_text()
    assert "## Every run against the base (overall)" in md
    assert f"| measure | base | {casual.name} | {better.name} |" in md
    assert "**1 breach(es) of the gate**" in md and "**the gate passes**" in md  # casual breaches, better passes
    assert "Worse in the new run (worst first)" in md and "](../base/wav/u001.wav)" in md and "](../casual/wav/u001.wav)" in md
    data = json.loads((out / "compare.json").read_text())
    assert [Path(r["new"]).name for r in data["runs"]] == ["casual", "better"] and "corpus_wer" in data["runs"][0]["measures"]
    assert json.loads((tmp_path / "c.json").read_text()) == data
    for chart in ("forest", "failures"):
        assert (out / f"{chart}.png").stat().st_size > 10_000 and (out / f"{chart}.csv").is_file()
    forest = (out / "forest.csv").read_text()
    assert "casual" in forest and "urls" in forest and "better" in forest


def test_what_cannot_be_compared_is_refused_or_compared_on_the_common_part(runs, tmp_path, capsys):
    base = runs[0]
    assert main(["compare", str(base), str(tmp_path / "nope")]) == 2
    other_tag = fake_run(tmp_path / "other", TEXTS, TEXTS, tag="openai-whisper_base")
    assert main(["compare", str(base), str(other_tag)]) == 2
    assert "no ASR scores in common" in capsys.readouterr().err
    disjoint = fake_run(tmp_path / "disjoint", TEXTS[:5], TEXTS[:5], ids=[f"z{i}" for i in range(5)])
    assert main(["compare", str(base), str(disjoint)]) == 2
    changed = fake_run(tmp_path / "changed", [t + " extra" for t in TEXTS], TEXTS)
    assert main(["compare", str(base), str(changed)]) == 2
    assert "texts differ" in capsys.readouterr().err
    # Part of the set, and some seeds changed: compared on what pairs up, and said so.
    half = fake_run(tmp_path / "half", TEXTS[:40], TEXTS[:40], extra=[{**c, "seed": 1 if i < 30 else 2}
                                                                       for i, c in enumerate(CATS[:40])])
    c = compare_runs(base, half)
    assert c.pairs == 30 and any("20 only in the base" in n for n in c.notes) and any("seeds differ" in n for n in c.notes)
    # An engine without seeds (Piper's rows have none) pairs with every seed of the other run.
    unseeded = fake_run(tmp_path / "unseeded", TEXTS, TEXTS, extra=[{**c, "seed": None} for c in CATS])
    assert compare_runs(unseeded, half).pairs == 40 and not any("seeds" in n for n in compare_runs(unseeded, half).notes)


@pytest.mark.slow
def test_the_exit_code_through_the_cli_process(runs, tmp_path):
    """With no --gate and no --out: the default gate lets the overall corpus WER rise by nothing
    beyond noise, so 5 sentences of 60 losing one word each (+0.64 points; in the bootstrap at
    least one of them is drawn in 99.5% of resamples, so the low end is above 0) fail; the folder
    is NEW/compare-vs-BASE."""
    base = runs[0]
    hyps = [" ".join(h.split()[:-1]) if i % 12 == 1 else h for i, h in enumerate(_worse(TEXTS, 10))]
    slight = fake_run(tmp_path / "slight", TEXTS, hyps, extra=CATS)
    p = subprocess.run([sys.executable, "-m", "eval", "compare", str(base), str(slight)], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "corpus_wer" in p.stdout and "REGRESSION" in p.stdout
    md = (slight / "compare-vs-base" / "compare.md").read_text()
    wer = json.loads((slight / "compare-vs-base" / "compare.json").read_text())["runs"][0]["deltas"]["all"]["corpus_wer"]
    assert wer["delta"] == pytest.approx(5 / (13 * 60)) and 0 < wer["low"] < 0.005 and "**1 breach(es)" in md


def _drawn(monkeypatch) -> dict:
    """The figures the comparison folder draws, by file name (forest, failures), kept as drawn."""
    figures, save = {}, folder.save_chart

    def keep(fig, path, data):
        figures[Path(path).stem] = fig
        return save(fig, path, data)

    monkeypatch.setattr(folder, "save_chart", keep)
    return figures


def _points(fig) -> dict[str, dict[str, tuple[float, float, float]]]:
    """What a deltas chart shows: series (run) -> row label -> (point, interval low, high), in the
    chart's units (points: x100), each point matched to the row label at its height."""
    ax = fig.axes[0]
    labels = {round(y): t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    out = {}
    for bars in ax.containers:
        line, _, (xerr,) = bars
        rows = out.setdefault(bars.get_label(), {})
        for x, y, seg in zip(line.get_xdata(), line.get_ydata(), xerr.get_segments()):
            assert abs(seg[0][1] - y) < 1e-9 and abs(y - round(y)) < 0.4  # the bar on its point, the point on its row
            rows[labels[round(y)]] = (float(x), float(seg[0][0]), float(seg[1][0]))
    return out


def test_each_forest_row_shows_its_own_categorys_delta_and_interval(tmp_path, monkeypatch):
    """Three categories, each with its own known change: alpha loses 2 of 13 words in every sentence
    (+15.38 points, and an interval of no width: every resample is the same), beta loses 6 in every
    other sentence (+23.08, a real interval), gamma none (0, no width); a second run worsens gamma
    only. Each row of the forest chart, for each run, must show that category's delta and interval
    (checked against sums of the scored rows and the normal approximation of the bootstrap), and
    compare.md's per-category table the same."""
    names = ("alpha", "beta", "gamma")
    cats = [{"category": names[i % 3]} for i in range(len(TEXTS))]
    lost = {"regressed": lambda cat, j: {"alpha": 2, "beta": 6 * (j % 2), "gamma": 0}[cat],
            "gamma_only": lambda cat, j: 1 if cat == "gamma" else 0}
    base = fake_run(tmp_path / "base", TEXTS, TEXTS, extra=cats)
    news = [fake_run(tmp_path / name, TEXTS, [" ".join(t.split()[:len(t.split()) - f(names[i % 3], i // 3)])
                                              for i, t in enumerate(TEXTS)], extra=cats) for name, f in lost.items()]
    figures = _drawn(monkeypatch)
    out = tmp_path / "cmp"
    assert main(["compare", str(base), *map(str, news), "--out", str(out)]) == 1
    drawn = _points(figures["forest"])
    assert set(drawn) == set(lost)
    md = (out / "compare.md").read_text()

    def scored(run):
        return [json.loads(line) for line in (run / "asr/faster-whisper_tiny.en_int8/scores.jsonl").read_text().splitlines()]

    for new in news:
        b, n = scored(base), scored(new)
        rows = drawn[new.name]
        assert set(rows) == {"overall", *names}
        for cat in ("overall", *names):
            keep = [i for i in range(len(TEXTS)) if cat == "overall" or cats[i]["category"] == cat]
            ref = sum(n[i]["n_ref"] for i in keep)
            assert ref == 13 * len(keep) == sum(b[i]["n_ref"] for i in keep)  # every sentence 13 words, both runs
            edits = np.array([n[i]["errors"] - b[i]["errors"] for i in keep], float)  # per sentence, new - base
            want = edits.sum() / ref
            # the bootstrap of a mean of len(keep) sentences: its 95% interval ~ +-1.96 sd / sqrt(n)
            half = 1.96 * edits.std() / 13 / np.sqrt(len(keep))
            point, low, high = (v / 100 for v in rows[cat])
            assert point == pytest.approx(want, abs=1e-9), (new.name, cat)
            if half == 0:  # the same change in every sentence: every resample gives it
                assert low == pytest.approx(want, abs=1e-9) and high == pytest.approx(want, abs=1e-9), (new.name, cat)
            else:
                assert low == pytest.approx(want - half, abs=0.25 * half) and high == pytest.approx(want + half, abs=0.25 * half)
            if cat != "overall" and new.name == "regressed":
                assert f"| {cat} | {len(keep)} | +{100 * want:.2f}% [+{100 * low:.2f}%, +{100 * high:.2f}%] |" in md
    # the side-by-side table's row: each run's own overall delta in its own column
    cells = [drawn[name]["overall"] for name in lost]
    assert "| corpus_wer | 0.00% | " + " | ".join(f"+{p:.2f}% [+{lo:.2f}%, +{hi:.2f}%]" for p, lo, hi in cells) + " |" in md
    # what the construction says, in words: the rows differ, so a row showing another's delta is seen
    assert [round(drawn["regressed"][c][0], 2) for c in ("overall", *names)] == [12.82, 15.38, 23.08, 0.0]
    assert [round(drawn["gamma_only"][c][0], 2) for c in ("overall", *names)] == [2.56, 0.0, 0.0, 7.69]


def test_each_failure_row_shows_its_own_entrys_change(runs, tmp_path, monkeypatch):
    """The casual run fails catastrophically in 30 of 60 pairs (8 of 13 words lost), the base in none:
    that row (and "any") is +50 points with Newcombe's interval, computed here from Wilson's closed
    form (the base side has no events, so the pairs' correlation term is 0); every other entry is 0
    with the interval +-z^2 / (n + z^2) of 0 events in 60 on both sides."""
    base, _, casual, _ = runs
    figures = _drawn(monkeypatch)
    main(["compare", str(base), str(casual), "--out", str(tmp_path / "cmp")])
    (rows,) = _points(figures["failures"]).values()
    z, n = 1.959963984540054, 60

    def wilson(k):
        p = k / n
        mid, half = (p + z * z / (2 * n)) / (1 + z * z / n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return mid - half, mid + half

    none_high = wilson(0)[1]
    assert none_high == pytest.approx(z * z / (n + z * z))
    lo30, hi30 = wilson(30)
    for entry, (point, low, high) in rows.items():
        if entry in ("catastrophic", "any"):
            assert point / 100 == pytest.approx(0.5)
            assert low / 100 == pytest.approx(0.5 - np.hypot(0.5 - lo30, none_high)) and high / 100 == pytest.approx(hi30)
        else:
            assert (point, low / 100, high / 100) == (0, pytest.approx(-none_high), pytest.approx(none_high)), entry
    assert {"catastrophic", "any", "runaway", "loop"} <= set(rows)
