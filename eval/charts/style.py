"""One look for every eval chart: words for titles, run context, safe colours, CSV beside PNG.

- Colours: the Okabe-Ito palette for series (distinguishable with the common colour-vision
  deficiencies), each series also gets its own marker; heatmaps use cividis (perceptually
  uniform, readable in greyscale and with deuteranopia).
- Dark mode: figures are opaque with their own light background and dark text, so a chart
  reads the same on the app's dark theme as on paper (a transparent PNG would put black text
  on a dark page).
- Every chart has a title in words and a subtitle with the run's context: model (and whether
  its weights are random), set and n, ASR, device, date.
- `save_chart` writes the PNG and, beside it, a CSV of exactly the numbers drawn.
"""

from __future__ import annotations

import json
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.rcsetup import cycler  # noqa: E402  (matplotlib.cycler: the same, validating, function)

from eval.jsonio import replace_atomic  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
HEATMAP_CMAP = "cividis"
BACKGROUND = "#ffffff"
TEXT = "#1a1a1a"
GREY = "#777777"

# Keyed by matplotlib's rc names: the type check holds each key to them.
STYLE: dict[RcKeyType, Any] = {
    "figure.facecolor": BACKGROUND, "axes.facecolor": BACKGROUND, "savefig.facecolor": BACKGROUND,
    "savefig.transparent": False, "text.color": TEXT, "axes.labelcolor": TEXT, "axes.edgecolor": "#444444",
    "xtick.color": TEXT, "ytick.color": TEXT, "axes.prop_cycle": cycler(color=list(OKABE_ITO)),
    "font.size": 9, "axes.titlesize": 10, "figure.titlesize": 12, "axes.grid": True, "grid.color": "#dddddd",
    "grid.linewidth": 0.6, "legend.framealpha": 0.9,
}


def fmt_value(v) -> str:
    """An axis value for a label: 0.3, 2, True, None."""
    return f"{v:g}" if isinstance(v, float) else str(v)


def series_style(i: int) -> dict:
    return {"color": OKABE_ITO[i % len(OKABE_ITO)], "marker": MARKERS[i % len(MARKERS)]}


@dataclass(frozen=True)
class RunContext:
    model: str
    random_weights: bool | None
    set: str
    n: int
    asr: str | None
    device: str
    date: str

    def subtitle(self) -> str:
        weights = {True: "random weights: noise, not speech", False: "trained weights", None: "weights unknown"}[self.random_weights]
        return (f"model {self.model} ({weights}) | set {self.set}, n={self.n} | "
                f"ASR {self.asr or 'none (not scored)'} | device {self.device} | {self.date}")

    @classmethod
    def from_run(cls, run_dir: str | Path, n: int | None = None, asr: str | None = None) -> "RunContext":
        """Context of a run folder (config.json, environment.json, status.json)."""
        d = Path(run_dir)
        cfg = json.loads((d / "config.json").read_text()) if (d / "config.json").is_file() else {}
        run = cfg.get("run", {})
        env = json.loads((d / "environment.json").read_text())["sessions"][-1] if (d / "environment.json").is_file() else {}
        engine = env.get("engine", {})
        if n is None:
            n = cfg.get("items", 0)
        set_name = Path(str(run.get("set", "?"))).name
        device = engine.get("device") or run.get("device") or "cpu"
        return cls(model=str(run.get("model", engine.get("model", "?"))), random_weights=engine.get("random_weights"),
                   set=set_name, n=int(n), asr=asr, device=str(device),
                   date=(env.get("started") or cfg.get("created") or time.strftime("%Y-%m-%d"))[:10])


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 6.0, height: float = 4.0, **kw):
    """(fig, 2-D array of axes) in the house style, laid out by matplotlib's constrained layout."""
    with plt.rc_context(STYLE):
        return plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False, layout="constrained", **kw)


def _wrap(text: str, fig, fontsize: float) -> str:
    chars = max(40, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))
    return "\n".join(textwrap.wrap(text, chars, break_long_words=False))


def finish(fig, title: str, context: RunContext | str | None, note: str | None = None) -> None:
    """Title in words, the run context under it, an optional note (how to read it) at the bottom."""
    sub = context.subtitle() if isinstance(context, RunContext) else (context or "")
    sub = _wrap(sub, fig, 7.5) if sub else ""
    note = _wrap(note, fig, 7) if note else ""
    h = fig.get_figheight() * 72  # points
    top = 1 - (22 + 11 * (sub.count("\n") + 1 if sub else 0)) / h
    bottom = (10 * (note.count("\n") + 1) + 4) / h if note else 0
    fig.text(0.5, 1 - 4 / h, title, ha="center", va="top", fontsize=12, color=TEXT)
    if sub:
        fig.text(0.5, 1 - 22 / h, sub, ha="center", va="top", fontsize=7.5, color=GREY, linespacing=1.3)
    if note:
        fig.text(0.01, 2 / h, note, ha="left", va="bottom", fontsize=7, color="#555555", linespacing=1.3)
    fig.get_layout_engine().set(rect=(0, bottom, 1, top - bottom))


def save_chart(fig, path: str | Path, data: pd.DataFrame) -> Path:
    """PNG (opaque, 130 dpi) and the CSV of the numbers drawn, both written atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_atomic(path.with_suffix(".csv"), lambda tmp: data.to_csv(tmp, index=False))
    with plt.rc_context(STYLE):
        replace_atomic(path, lambda tmp: fig.savefig(tmp, dpi=130, format="png", facecolor=BACKGROUND))
    plt.close(fig)
    return path
