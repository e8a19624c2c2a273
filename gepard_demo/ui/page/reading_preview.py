"""The live note under the text box: what the model will read (the text after the lexicon and the
normaliser, text/front_end.py), shown while text_normalization is on or a lexicon applies, so a
visitor sees "five dollars fifty cents" before pressing Generate. It reads the text through the
process's front end (`front_end.shared`, the one GepardEngine.prompt_ids reads every prompt through,
with the server-wide --lexicon), so the preview is what is said; `preview_reading` on the page's API.
"""

from __future__ import annotations

import html

import gradio as gr
from gradio.components import Component

from gepard_demo.streaming.breaks import Part, split_breaks
from gepard_demo.streaming.text_input import TextError
from gepard_demo.text.front_end import OFF, Reading
from gepard_demo.text.front_end import shared as front_end
from gepard_demo.text.lexicon import LexiconError, parse_cached

# A live note runs on every edit: past this many characters (a chapter) it previews the start only,
# so the library normaliser (~1 ms a character, docs/PERFORMANCE.md §14) never keeps a visitor waiting.
PREVIEW_CHARS = 2000
PREVIEW_ID = "gepard-reading-preview"


def _cut(text: str) -> tuple[str, bool]:
    if len(text) <= PREVIEW_CHARS:
        return text, False
    head = text[:PREVIEW_CHARS]
    return (head.rsplit(None, 1)[0] if " " in head else head), True  # never a word cut in two


def preview_html(text: str, text_normalization: str, lexicon_entries: str) -> str:
    """The note's HTML: empty where the model reads the text as written (normalisation off, no
    lexicon, no break); else the text it reads, each changed run marked with what was written (its
    title), each break's silence said where it falls.
    A bad lexicon or mode is said in the note, naming the control (Generate refuses it the same way)."""
    text = (text or "").strip()
    front = front_end()
    as_written = text_normalization == OFF and not (lexicon_entries or "").strip() and not front.lexicon.entries
    if not text or (as_written and "<break" not in text):
        return ""
    shown, cut = _cut(text)
    try:
        parts = split_breaks(shown) if not cut else [Part(shown)]  # a cut may fall inside a break's tag
        lexicon = parse_cached(lexicon_entries or "", "lexicon_entries")
        words = " ".join(_part(front.read(p.text, text_normalization, lexicon), p.pause_s) for p in parts)
    except (ValueError, ImportError) as e:  # TextError, LexiconError are ValueErrors; "nemo" without its library
        field = e.field if isinstance(e, LexiconError) else "input" if isinstance(e, TextError) else "text_normalization"
        return f'<div class="gepard-words-note" role="status">{html.escape(field)}: {html.escape(str(e))}</div>'

    more = f" … (the first {PREVIEW_CHARS:,} characters)" if cut else ""
    return (f'<div class="gepard-words-note">The model will read ({html.escape(text_normalization)}; '
            f'changed words marked, hover for what was written):</div><div data-reading>{words}{more}</div>')


def _part(reading: Reading, pause_s: float) -> str:
    words = " ".join(
        f'<mark title="{html.escape(p.written)}">{html.escape(p.spoken)}</mark>' if p.changed else html.escape(p.spoken)
        for p in reading.pieces)
    return words + (f" <em>[{pause_s:g} s of silence]</em>" if pause_s else "")


def build_preview() -> gr.HTML:
    """The note's place: right under the text box (layout.text_and_buttons calls it there)."""
    return gr.HTML("", elem_id=PREVIEW_ID)


def wire_preview(note: gr.HTML, text: Component, text_normalization: Component, lexicon_entries: Component) -> None:
    """The note follows the text and the two controls, the last edit winning, beside Generate's queue."""
    inputs = [text, text_normalization, lexicon_entries]
    for source in inputs:
        # every input widget has .change; gradio's Component does not declare it
        source.change(preview_html, inputs, note, api_name="preview_reading" if source is text else None,  # type: ignore[attr-defined]
                      api_visibility="public" if source is text else "private", trigger_mode="always_last",
                      concurrency_limit=2, concurrency_id="gepard-preview", show_progress="hidden")
