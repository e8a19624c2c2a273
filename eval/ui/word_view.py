"""A row's words in the Eval tab, coloured by error, each one a click away from its moment in the
row's audio (the page's captions.js plays any element with data-seek inside a container whose
data-audio-from names the player)."""

from __future__ import annotations

import html
from pathlib import Path

from eval.runs.score import scored_tags
from eval.runs.words import load_words
from eval.scoring.word_alignment import counts

LEGEND = ("<span class='gepard-w' data-op='sub'>substituted</span> <span class='gepard-w' data-op='del'>not heard"
          "</span> <span class='gepard-w' data-op='ins'>added</span>")


def newest_tag(run_dir: Path) -> str | None:
    tags = scored_tags(run_dir)
    return max(tags, key=lambda t: (run_dir / "asr" / t / "scores.jsonl").stat().st_mtime) if tags else None


def words_html(ops: list[dict], player: str = "#eval-failed-audio", note: str = "") -> str:
    spans = []
    for o in ops:
        word = o["hyp"] if o["op"] in ("ok", "sub", "ins") else o["ref"]
        when = "" if o["s"] is None else f" at {o['s']:.2f} s"
        title = {"ok": f"heard{when}", "sub": f"heard for \"{o['ref']}\"{when}", "del": f"not heard; it belongs{when}",
                 "ins": f"heard, not in the text{when}"}[o["op"]]
        seek = "" if o["s"] is None else f" data-seek='{o['s']}'"
        spans.append(f"<span class='gepard-w' data-op='{o['op']}'{seek} title='{html.escape(title, quote=True)}'>"
                     f"{html.escape(word or '')}</span>")
    c = counts(ops)
    line = (f"{c['sub']} substituted, {c['del']} not heard, {c['ins']} added; click a word to hear it. {LEGEND}"
            + (f" ({html.escape(note)})" if note else ""))
    return (f"<div class='gepard-words' data-audio-from='{player}'>{' '.join(spans)}</div>"
            f"<div class='gepard-words-note'>{line}</div>")


def row_words(run_dir: Path, utt_id: str) -> str:
    """The row's words as HTML, or a line saying why there are none."""
    tag = newest_tag(run_dir)
    words = load_words(run_dir, tag).get(utt_id)
    if words is None:
        return ("<div class='gepard-words-note'>No word alignment for this row yet (`python -m eval score` "
                "aligns every scored row).</div>")
    return words_html(words["ops"], note=words.get("note") or "")
