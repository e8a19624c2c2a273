"""The Eval tab's load test: a speech server at a few concurrencies, as `python -m eval load`.

A URL, the concurrencies, the requests a point and each request's length; the report (the
bench's figures, one row a point) and the knee chart. The folder goes to <runs_dir>/load/<time>/,
the same folder the command line writes.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from eval.load.client import LoadError
from eval.load.folder import run_load
from eval.load.runner import LoadConfig
from eval.runs.sets import load_set

from .common import chart_images, tab_error

MAX_PROMPTS = 200  # a point's requests from the page: a bound on what one click can start


def parse_concurrencies(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in str(text or "").replace(" ", "").split(",") if v)
    except ValueError:
        raise LoadError(f"concurrency: {text!r} is not whole numbers separated by commas (e.g. 1,2,4)") from None
    if not values or min(values) < 1:
        raise LoadError(f"concurrency: name one or more, each at least 1 (e.g. 1,2,4), got {text!r}")
    return values


def load_in_tab(runs_dir: str | Path, url: str, concurrencies: str, prompts: float, frames: float,
                set_name: str = "core", log=lambda m: None) -> tuple[str, str | None, str]:
    """(the report's markdown, the knee chart's path or None, the folder) of one load run."""
    url = (url or "").strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise LoadError(f"server URL: {url!r} is not http://HOST:PORT")
    prompts, frames = int(prompts or 0), int(frames or 0)
    if not 1 <= prompts <= MAX_PROMPTS:
        raise LoadError(f"requests a point: must be in [1, {MAX_PROMPTS}], got {prompts}")
    if frames < 1:
        raise LoadError(f"frames a request: must be at least 1, got {frames}")
    base = LoadConfig(urls=(url,), texts=tuple(u.text for u in load_set(set_name)), num_prompts=prompts,
                      extra_body={"max_new_tokens": frames})
    points = [dataclasses.replace(base, max_concurrency=c) for c in parse_concurrencies(concurrencies)]
    out = Path(runs_dir) / "load" / time.strftime("%Y%m%d-%H%M%S")
    outcome = run_load(points, out, log=log)
    knee = out / "knee.png"
    return outcome.report.read_text(encoding="utf-8"), str(knee) if knee.is_file() else None, str(out)


def build_load_section(runs_dir: str) -> None:
    import gradio as gr

    with gr.Accordion("Load a speech server (vllm bench's figures)", open=False, elem_id="eval-load"):
        with gr.Row():
            url = gr.Textbox(label="Server URL (ours or vLLM-Omni)", placeholder="http://127.0.0.1:8091",
                             elem_id="eval-load-url")
            conc = gr.Textbox(value="1,2,4", label="Concurrencies", elem_id="eval-load-concurrency")
            prompts = gr.Number(value=8, precision=0, minimum=1, maximum=MAX_PROMPTS, label="Requests a point")
            frames = gr.Number(value=300, precision=0, minimum=1, label="Frames a request (max_new_tokens)")
        run = gr.Button("Run the load test", elem_id="eval-load-run")
        report = gr.Markdown(elem_id="eval-load-report")
        knee = gr.Image(type="pil", label="The knee", interactive=False)

    def _run(u: str, c: str, p: float, f: float):
        try:
            text, chart, _ = load_in_tab(runs_dir, u, c, p, f)
        except Exception as e:  # a refused URL or setting is shown in the tab, naming it
            raise tab_error(e) from e
        return text, chart_images([chart])[0][0] if chart else None

    run.click(_run, [url, conc, prompts, frames], [report, knee], api_name="eval_load", concurrency_limit=1)
