"""'Open in the demo': an eval row's text, settings, voice and seed put into the Speak tab, which
then makes it again as a take (gepard_demo.ui.page.speak_link.SpeakLink does the page's side).

What a row can give depends on what made it (eval.runs.rows.row_settings):
- a local engine's row: everything (sampling with its seed, guidance, streaming, the voice), so
  the take's frames are the row's (up to batch-shape rounding when the run batched several
  utterances on a GPU, facts §3; on this project's CPU runs they are equal, tests/page/test_eval_tab_browser.py);
- a served row: its seed and frame budget (the server fixed the rest; the page keeps its own);
- a Piper or files row: the text and seed only (that audio was not made by Gepard).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.ui.page.controls import control_values

from .runs_view import find_row

if TYPE_CHECKING:
    import gradio as gr
    from gradio.components import Component

    from gepard_demo.ui.page.speak_link import SpeakLink
    from gepard_demo.units import Json

REFS_DIR = "gepard-eval-refs"  # under the system temp folder, which Gradio may serve


def demo_values(runs_dir: str | Path, run: str, utt_id: str) -> tuple[dict[str, Json], str]:
    """(Speak tab control values, a line saying what was loaded) for one row of a run."""
    d, row = find_row(runs_dir, run, utt_id)
    settings = row.get("settings") or {}
    values: dict[str, Json] = {"text": row["text"]}
    seed = row.get("seed")
    if "sampling" in settings:
        sampling = SamplingSettings(**settings["sampling"])
        values.update(control_values(sampling, StreamSettings(**settings["stream"])))
        what = f"its text, settings and seed {sampling.seed}"
    elif "server_urls" in settings:
        values.update(seed=settings["seed"], random_seed=False, max_frames=settings["max_new_tokens"])
        what = (f"its text, seed {settings['seed']} and frame budget (the server fixed its other settings, "
                "see the run's environment.json: the page keeps its own)")
    else:
        if seed is not None:
            values.update(seed=seed, random_seed=False)
        what = f"its text{f' and seed {seed}' if seed is not None else ''} ({settings.get('engine', 'this engine')} " \
               "audio was not made by Gepard: the page keeps its own settings)"
    ref = row.get("ref_audio")
    if ref and Path(ref).is_file():
        values["ref_audio"] = servable_copy(Path(ref))
        what += f", voice {Path(ref).name}"
    elif ref:
        values["ref_audio"] = None
        what += f" (its voice {ref} is gone: the default voice is set)"
    else:
        values["ref_audio"] = None  # the row used the default voice: a clip the visitor uploaded would change it
    return values, f"{d.name} / {utt_id}: {what}; generating it again as a take."


def servable_copy(path: Path) -> str:
    """The reference clip where Gradio may serve it from (its temp folder), named by its content,
    so a clip anywhere on disk (a run's --ref-audio) can go into the page's voice control."""
    data = path.read_bytes()
    folder = Path(tempfile.gettempdir()) / REFS_DIR
    folder.mkdir(exist_ok=True)
    out = folder / f"{hashlib.sha256(data).hexdigest()[:16]}{path.suffix or '.wav'}"
    if not out.exists():
        tmp = out.with_suffix(out.suffix + ".part")
        shutil.copyfile(path, tmp)
        tmp.replace(out)
    return str(out)


def wire_open(button: gr.Button, inputs: list[Component], pick: Callable[..., tuple[str | None, str | None]],
              speak: SpeakLink | None, note: gr.Markdown, runs_dir: str) -> None:
    """button.click: pick(*inputs) -> (run, utterance id) is opened in the demo, then generated
    (either None or empty: no row picked yet, refused).
    speak None (the tab built outside the app): the button says there is no demo to open."""
    import gradio as gr

    from .common import tab_error

    if speak is None:
        button.click(lambda *a: "No Speak tab on this page.", inputs, [note], api_visibility="private")
        return

    def _open(*args):
        try:
            run, utt_id = pick(*args)
            if not run or not utt_id:
                raise ValueError("pick a row first")
            values, line = demo_values(runs_dir, run, utt_id)
        except Exception as e:
            raise tab_error(e) from e
        gr.Info(line)
        return [line, *speak.updates(values)]

    from gepard_demo.ui.page.speak_link import GENERATE_JS

    button.click(_open, inputs, [note, *speak.outputs()], api_visibility="private").success(None, js=GENERATE_JS)
