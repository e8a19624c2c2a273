"""Charts: what they draw (zero bars, whole-number counts), their CSVs, sweep heatmaps with a
CFG-scale axis as small multiples, the paired marks and the best-point rule."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from tests.support.eval_fixtures import fake_run
from PIL import Image

from eval.charts.run_charts import duration_ratio_figure, wer_by_category_data, wer_by_category_figure, write_charts
from eval.jsonio import write_json_atomic
from eval.report.summary import write_outputs
from eval.sweeps.grid import default_point
from eval.sweeps.heatmaps import HELD_OUT, sweep_charts

IDS = [f"cmd-{i:02d}" for i in range(1, 22)]
TEXTS = [f"please turn the kitchen light number {i} off right now" for i in range(1, 22)]


def _drop_last(texts, which):
    return [" ".join(t.split()[:-3]) if which(i) else t for i, t in enumerate(texts)]


def test_wer_by_category_draws_a_bar_and_label_for_zero(tmp_path):
    texts = [t + ("!" if i % 2 else "") for i, t in enumerate(TEXTS[:6])]  # fake_run: category by length parity
    run = fake_run(tmp_path / "r", texts, _drop_last(texts, lambda i: i % 2 == 0))
    _, summary = write_outputs(run)
    data = wer_by_category_data(summary)
    assert (data["wer"] == 0).any() and (data["wer"] > 0).any()  # fake_run's categories: one perfect, one not
    fig = wer_by_category_figure(data, "ctx")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.texts]
    assert "0.0%" in labels and len(labels) == len(data)  # every category labelled, 0% included
    marks = ax.collections[-1].get_offsets()
    assert len(marks) == len(data) and (np.asarray(marks)[:, 0] == 0).any()  # a visible marker at 0


def test_duration_histogram_counts_are_whole_numbers():
    df = pd.DataFrame({"duration_ratio": [0.9, 1.1, 1.3], "id": ["a", "b", "c"]})
    fig = duration_ratio_figure(df, "ctx")
    ax = fig.axes[0]
    fig.canvas.draw()
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_run_charts_have_csvs_context_and_an_opaque_background(tmp_path):
    run = fake_run(tmp_path / "r", TEXTS[:6], TEXTS[:6])
    df, summary = write_outputs(run)
    made = write_charts(run, df, summary)
    assert {p.name for p in made} == {"wer_by_category.png", "duration_ratio.png", "frames_vs_words.png", "stop_head.png"}
    for p in made:
        assert p.with_suffix(".csv").is_file()
        im = np.asarray(Image.open(p).convert("RGBA"))
        assert (im[..., 3] == 255).all()  # readable on the app's dark theme: no transparent background


def _fake_sweep(tmp_path):
    """T x S x cfg_scale grid of hand-made scored runs; every point shares the ids.

    default (T0.3, S0.5, cfg 1): 3 of 21 hypotheses lose words; "bad" (T0.7, S0.5, cfg 2) loses
    words in every one; "cheat" (T0.7, S0.3, cfg 1) is perfect on the held-out ids only;
    "good" (T0.3, S0.3, cfg 2) is perfect on one more tuning id than the default.
    """
    out = tmp_path / "sweep"
    base_bad = {0, 6, 13, 20, 3}  # 6, 13, 20 are the held-out cmd-07/14/21
    axes = {"temperature": [0.3, 0.7], "cfg_scale": [1.0, 2.0], "stop_threshold": [0.3, 0.5]}
    lines = []
    for t in axes["temperature"]:
        for c in axes["cfg_scale"]:
            for s in axes["stop_threshold"]:
                bad = set(base_bad)
                if (t, s, c) == (0.7, 0.5, 2.0):
                    bad = set(range(21))
                elif (t, s, c) == (0.7, 0.3, 1.0):
                    bad = base_bad - {6, 13, 20}
                elif (t, s, c) == (0.3, 0.3, 2.0):
                    bad = base_bad - {3}
                name = f"T{t:g}_S{s:g}_cfg_scale{c:g}"
                d = fake_run(out / name, TEXTS, _drop_last(TEXTS, lambda i, b=bad: i in b), ids=IDS)
                cfg = json.loads((d / "config.json").read_text())
                cfg["run"].update(sampling={"temperature": t, "stop_threshold": s, "max_frames": 1000},
                                  stream={"silence_ms": 0.0, "fade_ms": 0.0}, model="tiny", set="hand.jsonl")
                write_json_atomic(d / "config.json", cfg)
                _, summ = write_outputs(d)
                o = summ["overall"]
                lines.append({"temperature": t, "stop_threshold": s, "cfg_scale": c, "n": o["n"], "run": name,
                              "wer_corpus": o["wer_corpus"]["value"], "wer_ci_low": o["wer_corpus"]["ci_low"],
                              "wer_ci_high": o["wer_corpus"]["ci_high"], "runaway_rate": 0.0,
                              "truncation_rate": 0.0, "duration_ratio_median": 1.0})
    pd.DataFrame(lines).to_csv(out / "sweep.csv", index=False)
    write_json_atomic(out / "sweep.json", {"config": {"axes": axes}, "asr": "faster-whisper_tiny.en_int8"})
    return out


@pytest.mark.slow
def test_sweep_heatmaps_small_multiples_marks_and_best_point(tmp_path):
    out = _fake_sweep(tmp_path)
    assert default_point({"temperature": [0.3, 0.7], "cfg_scale": [1.0, 2.0], "stop_threshold": [0.3, 0.5]}) == \
        {"temperature": 0.3, "cfg_scale": 1.0, "stop_threshold": 0.5}
    made = sweep_charts(out, log=lambda m: None)
    names = {p.name for p in made}
    assert {"sweep_wer_corpus.png", "sweep_runaway_rate.png", "calibration_tradeoff.png"} <= names
    cells = pd.read_csv(out / "charts" / "sweep_wer_corpus.csv")
    assert len(cells) == 8 and set(cells["cfg_scale"]) == {1.0, 2.0}  # one panel per CFG scale
    assert cells["default"].sum() == 1
    d = cells.set_index(["temperature", "stop_threshold", "cfg_scale"])
    assert d.loc[(0.7, 0.5, 2.0), "mark"] == "+"  # significantly worse than the default
    assert pd.isna(d.loc[(0.3, 0.5, 1.0), "mark"]) or d.loc[(0.3, 0.5, 1.0), "mark"] == ""
    assert (d["ci_low"] <= d["value"]).all() and (d["value"] <= d["ci_high"]).all()
    best = json.loads((out / "sweep_best.json").read_text())["best"]
    # "cheat" has the lowest WER overall, but only on held-out ids: the rule never sees them
    assert best["run"] == "T0.3_S0.3_cfg_scale2"
    assert d.loc[(0.3, 0.3, 2.0), "best"] and d["best"].sum() == 1
    assert set(best["held_out_ids"]) == {"cmd-07", "cmd-14", "cmd-21"} <= HELD_OUT
    assert best["tuning_ids"] == 18
    img = Image.open(out / "charts" / "sweep_wer_corpus.png")
    assert img.width > img.height  # two panels side by side


def _point_table(ids, errors: dict, runaway=(), scored=True) -> pd.DataFrame:
    """One point's load_table columns that the best-point rule reads: 10 reference words per id."""
    return pd.DataFrame({"id": ids, "n_ref": [10.0 if scored else np.nan] * len(ids),
                         "errors": [float(errors.get(i, 0)) if scored else np.nan for i in ids],
                         "wer": [errors.get(i, 0) / 10 if scored else np.nan for i in ids],
                         "runaway": [i in runaway for i in ids]})


def _grid(tables: dict, axes: dict) -> pd.DataFrame:
    """sweep.csv lines for runs named T{t}_S{s}; rates over every id, held-out ones included."""
    lines = []
    for run, t in tables.items():
        temp, thr = (float(x[1:]) for x in run.split("_"))
        scored = t["wer"].notna()
        lines.append({"run": run, "temperature": temp, "stop_threshold": thr,
                      "wer_corpus": t.loc[scored, "errors"].sum() / t.loc[scored, "n_ref"].sum() if scored.any() else np.nan,
                      "runaway_rate": t["runaway"].mean()})
    return pd.DataFrame(lines)


def test_best_point_skips_a_point_with_no_scored_tuning_sentence():
    from eval.sweeps.heatmaps import best_point

    axes = {"temperature": [0.3], "stop_threshold": [0.3, 0.5]}
    tables = {"T0.3_S0.5": _point_table(IDS, {"cmd-01": 2}),
              "T0.3_S0.3": _point_table(IDS, {}, scored=False)}  # ASR not run: 0 errors of 0 words
    best = best_point(_grid(tables, axes), tables, "T0.3_S0.5", axes)
    assert best["run"] == "T0.3_S0.5" and best["tuning_wer"] == pytest.approx(2 / 180)
    only = {"T0.3_S0.5": tables["T0.3_S0.3"]}
    assert best_point(_grid(only, axes).assign(wer_corpus=0.1), only, "T0.3_S0.5", axes) is None  # nothing to choose


def test_best_point_tie_break_counts_runaways_on_tuning_ids_only():
    from eval.sweeps.heatmaps import best_point

    axes = {"temperature": [0.3, 0.7], "stop_threshold": [0.3, 0.5]}
    held = sorted(HELD_OUT & set(IDS))
    tables = {"T0.3_S0.5": _point_table(IDS, {"cmd-01": 2}),
              # equal tuning WER, equally far from the default; runaways on the held-out ids only
              "T0.3_S0.3": _point_table(IDS, {"cmd-02": 1}, runaway=held),
              # one runaway on a tuning id (too few to be significantly above the default)
              "T0.7_S0.5": _point_table(IDS, {"cmd-02": 1}, runaway=["cmd-03"]),
              "T0.7_S0.3": _point_table(IDS, {"cmd-02": 5})}
    df = _grid(tables, axes)
    rates = df.set_index("run")["runaway_rate"]
    assert rates["T0.3_S0.3"] > rates["T0.7_S0.5"]  # over every id the held-out runaways count
    best = best_point(df, tables, "T0.3_S0.5", axes)
    assert best["run"] == "T0.3_S0.3" and best["tuning_runaway_rate"] == 0.0


def test_heatmap_csv_has_a_ci_only_where_the_metric_has_one(tmp_path):
    from eval.sweeps.heatmaps import heatmap

    axes = {"temperature": [0.3], "stop_threshold": [0.3, 0.5]}
    df = pd.DataFrame({"run": ["a", "b"], "temperature": [0.3, 0.3], "stop_threshold": [0.3, 0.5],
                       "duration_ratio_median": [0.8, 1.1], "runaway_rate": [0.1, 0.2],
                       "runaway_ci_low": [0.05, 0.1], "runaway_ci_high": [0.2, 0.3]})
    marks = pd.DataFrame({"run": ["a", "b"]})
    dflt = {"temperature": 0.3, "stop_threshold": 0.5}
    heatmap(df, marks, "duration_ratio_median", axes, dflt, "ctx", tmp_path / "d.png")
    d = pd.read_csv(tmp_path / "d.csv")
    assert d["ci_low"].isna().all() and d["ci_high"].isna().all()  # a median ratio without a CI: not its value twice
    heatmap(df, marks, "runaway_rate", axes, dflt, "ctx", tmp_path / "r.png")
    r = pd.read_csv(tmp_path / "r.csv")
    assert list(r["ci_low"]) == [0.05, 0.1] and list(r["ci_high"]) == [0.2, 0.3]


class _Step:
    def __init__(self, codes):
        self.codes = codes


class _FakeEngine:
    """stream_frames of a deterministic frame per step (seeded), counting generations."""

    def __init__(self):
        from types import SimpleNamespace

        self.model_info = SimpleNamespace(name="fake", random_weights=True, device="cpu")
        self.generated = 0

    def stream_frames(self, request):
        import torch

        settings = request.sampling
        self.generated += 1
        g = torch.Generator().manual_seed(settings.seed)
        for _ in range(settings.max_frames):
            yield _Step(torch.randint(0, 100, (32,), generator=g))


class _FakeCodec:
    """A frame decodes to 4 samples; streamers count the rows measured."""

    samples_per_frame, sample_rate = 4, 80

    def __init__(self):
        self.streamers = 0

    def decode(self, frames):
        return np.repeat(frames.float().mean(1).numpy(), 4).astype(np.float32)

    def streamer(self, mode, lookback):
        self.streamers += 1
        return type("S", (), {"push": lambda _, piece: self.decode(piece)})()


def test_stream_chart_resumes_per_measured_row(tmp_path):
    from eval.charts.stream_chart import StreamChartConfig, stream_chart

    cfg = StreamChartConfig(limit=2, max_frames=6, chunk_sizes=(2, 4), lookback_frames=(0,), hardware_rtfs=(0.5,))
    rows = 2 * 2 * 2  # utterances x chunk sizes x (exact, lookback 0)
    codec = _FakeCodec()
    out = stream_chart(cfg, tmp_path / "sc", engine=_FakeEngine(), codec=codec)
    path = out / "chunk_timing.csv"
    assert codec.streamers == rows
    full = pd.read_csv(path)
    lines = path.read_text().splitlines(keepends=True)
    assert len(lines) == 1 + rows
    # killed after 3 rows, halfway through writing the 4th
    path.write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])
    codec, engine = _FakeCodec(), _FakeEngine()
    stream_chart(cfg, out, engine=engine, codec=codec)
    assert codec.streamers == rows - 3 and engine.generated == 2  # only the missing rows (both utterances lack some)
    again = pd.read_csv(path)
    key = ["id", "chunk", "mode", "lookback"]
    assert len(again) == rows and not again.duplicated(key).any()
    assert again[key].sort_values(key).reset_index(drop=True).equals(full[key].sort_values(key).reset_index(drop=True))
    # complete: nothing measured, the file untouched; only the simulated RTFs changed: rows kept
    before = path.stat().st_mtime_ns
    codec = _FakeCodec()
    stream_chart(StreamChartConfig(**{**cfg.__dict__, "hardware_rtfs": (0.1, 0.9)}), out, engine=_FakeEngine(), codec=codec)
    assert codec.streamers == 0 and path.stat().st_mtime_ns == before
    assert set(pd.read_csv(out / "stream_stalls.csv")["rtf"]) == {0.1, 0.9}
    # other frames (max_frames): every row measured again, none of the old ones kept
    codec = _FakeCodec()
    stream_chart(StreamChartConfig(**{**cfg.__dict__, "max_frames": 8}), out, engine=_FakeEngine(), codec=codec)
    assert codec.streamers == rows and len(pd.read_csv(path)) == rows and (pd.read_csv(path)["frames"] == 8).all()


def test_token_budget_shows_a_cliff_at_short_texts(tmp_path):
    """A run whose short texts fail (as the authors' <= 6-token cliff) draws it: every count from 1
    to 12 tokens is its own bin, then 13-24 and 25+; the short bins' Wilson intervals lie above the
    long bins', with k/n as counted, for each failure-table measure on its own judged rows."""
    from eval.charts.budget_chart import token_budget, token_budget_data

    tokens = [2] * 10 + [5] * 10 + [9] * 10 + [18] * 20 + [40] * 10
    fail = [i < 8 for i in range(10)] + [i < 7 for i in range(10)] + [i < 3 for i in range(10)] \
        + [i < 1 for i in range(20)] + [False] * 10
    derail = [None] * 10 + [True] * 5 + [False] * 5 + [None] * 40  # judged on 10 rows, all with 5 tokens
    df = pd.DataFrame({"id": [f"u{i}" for i in range(len(tokens))], "text_tokens": tokens, "fail_any": fail,
                       "fail_derail": derail})
    data = token_budget_data(df)
    anyf = data[data["measure"] == "any"]
    assert list(anyf["tokens"]) == ["2", "5", "9", "13-24", "25+"]
    assert list(anyf["k"]) == [8, 7, 3, 1, 0] and list(anyf["n"]) == [10, 10, 10, 20, 10]
    short, long = anyf.iloc[:2], anyf.iloc[3:]
    assert short["ci_low"].min() > long["ci_high"].max()  # the cliff is outside the noise
    assert anyf.iloc[-1]["ci_high"] > 0  # zero events still get an interval (Wilson), not [0, 0]
    d = data[data["measure"] == "derail"]
    assert list(d["tokens"]) == ["5"] and (d["k"].item(), d["n"].item()) == (5, 10)  # n: the rows it judged
    assert set(data[data["tokens"] == "18"]["measure"]) == set()  # 18 tokens falls in the 13-24 bin
    path = token_budget(df, tmp_path / "token_budget.png")
    assert path.is_file() and pd.read_csv(path.with_suffix(".csv")).query("measure == 'any'")["k"].tolist() == [8, 7, 3, 1, 0]
    # Rows nobody could judge (a served run without a tokenizer) draw no chart rather than an empty one.
    assert token_budget_data(df.assign(text_tokens=None)) is None


def test_heatmap_cells_give_rates_as_counts_with_their_interval():
    from eval.sweeps.heatmaps import _cell_text

    row = pd.Series({"runaway_rate": 0.0, "runaway_k": 0, "runaway_n": 30, "runaway_ci_low": 0.0, "runaway_ci_high": 0.1135,
                     "wer_corpus": 0.05, "wer_ci_low": 0.03, "wer_ci_high": 0.08})
    assert _cell_text("runaway_rate", row, "-") == "0.0 -\n0/30 [0.0, 11.3]"  # 0 of 30 is not "never"
    assert _cell_text("wer_corpus", row, "") == "5.0\n[3.0, 8.0]"
