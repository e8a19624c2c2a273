"""Grid sweep over temperature x stop threshold: one resumable sub-run per grid point.

<out>/T{temperature}_S{threshold}/ is an ordinary run folder (scored and reported when an
ASR is given); <out>/sweep.csv has one line per point and <out>/sweep.png draws corpus WER
(when scored), stop-fired rate and runaway rate against the grid. The engine is loaded once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from eval.jsonio import replace_atomic  # noqa: E402
from eval.run import RunConfig, run  # noqa: E402


@dataclass(frozen=True)
class SweepConfig:
    base: RunConfig = field(default_factory=RunConfig)
    temperatures: tuple[float, ...] = (0.3, 0.7, 1.0)
    stop_thresholds: tuple[float, ...] = (0.3, 0.5, 0.7)

    def points(self) -> list[tuple[float, float]]:
        if not self.temperatures or not self.stop_thresholds:
            raise ValueError("a sweep needs at least one temperature and one stop threshold")
        return [(t, s) for t in self.temperatures for s in self.stop_thresholds]


def point_dir(out: Path, temperature: float, threshold: float) -> Path:
    return out / f"T{temperature:g}_S{threshold:g}"


def sweep(cfg: SweepConfig, out: str | Path, asr=None, engine=None, transcriber=None, cache=None, log=print) -> Path:
    """Run (and score, when asr is an ASRSettings) every grid point; returns <out>/sweep.csv."""
    from eval.report import make_report
    from eval.summary import write_outputs

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    points = cfg.points()
    for t, s in points:  # validate the whole grid before spending minutes on the first point
        cfg.base.sampling.replace(temperature=t, stop_threshold=s).validate()
    if engine is None:
        from eval.engines import load_engine

        engine = load_engine(cfg.base.engine, cfg.base.model, cfg.base.device, cfg.base.model_cache)
    lines = []
    for t, s in points:
        d = point_dir(out, t, s)
        point = dataclasses.replace(cfg.base, sampling=cfg.base.sampling.replace(temperature=t, stop_threshold=s))
        log(f"sweep point temperature={t} stop_threshold={s} -> {d}")
        run(point, d, engine=engine, log=log)
        tag = None
        if asr is not None:
            from eval.asr import Transcriber
            from eval.score import score

            if transcriber is None:
                transcriber = Transcriber(asr, cache) if cache else Transcriber(asr)
            tag = score(d, asr, transcriber=transcriber)
            make_report(d, tag)
        _, summ = write_outputs(d, tag)
        o = summ["overall"]
        lines.append({
            "temperature": t, "stop_threshold": s, "n": o["n"], "run": d.name,
            "wer_corpus": (o.get("wer_corpus") or {}).get("value"),
            "wer_ci_low": (o.get("wer_corpus") or {}).get("ci_low"),
            "wer_ci_high": (o.get("wer_corpus") or {}).get("ci_high"),
            "stop_fired_rate": (o.get("stop_fired_rate") or {}).get("value"),
            "runaway_rate": (o.get("runaway_rate") or {}).get("value"),
            "duration_ratio_median": (o.get("duration_ratio") or {}).get("median"),
        })
    df = pd.DataFrame(lines)
    replace_atomic(out / "sweep.csv", lambda tmp: df.to_csv(tmp, index=False))
    _chart(df, out / "sweep.png")
    return out / "sweep.csv"


def _chart(df: pd.DataFrame, path: Path) -> None:
    metrics = [m for m in ("wer_corpus", "stop_fired_rate", "runaway_rate", "duration_ratio_median") if df[m].notna().any()]
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6), squeeze=False)
    for ax, m in zip(axes[0], metrics):
        for s, g in df.groupby("stop_threshold"):
            ax.plot(g["temperature"], g[m], marker="o", label=f"stop {s:g}")
            if m == "wer_corpus":
                ax.fill_between(g["temperature"], g["wer_ci_low"], g["wer_ci_high"], alpha=0.15)
        ax.set_xlabel("temperature")
        ax.set_title(m)
        ax.legend(fontsize=7)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
