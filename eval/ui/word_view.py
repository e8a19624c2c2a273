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


def groups(ops: list[dict]) -> list[list[dict]]:
    """The ops shown as one word each: the ops of one written token together (a read row's `wi`:
    "$5.50" over the words it became), every other op alone."""
    out: list[list[dict]] = []
    for o in ops:
        if out and o.get("wi") is not None and out[-1][-1].get("wi") == o["wi"]:
            out[-1].append(o)
        else:
            out.append([o])
    return out


def _span(group: list[dict]) -> str:
    """One shown word: its text, its op (the worst of its ops), its time and what the title says."""
    first = group[0]
    times = [(o["s"], o["e"]) for o in group if o["s"] is not None]
    s, e = (times[0][0], times[-1][1]) if times else (None, None)
    when = "" if s is None else f" at {s:.2f} s"
    op = first["op"] if len(group) == 1 else next((k for k in ("sub", "del") if any(o["op"] == k for o in group)), "ok")
    if "written" in first:  # a read row: the written token, over the span of what was heard for it
        heard = " ".join(o["hyp"] for o in group if o["hyp"])
        said = f", read as \"{first['spoken']}\"" if first.get("spoken") else ""
        word = first["written"]
        when = "" if s is None else f" at {s:.2f}\u2013{e:.2f} s"
        title = (f"written \"{word}\"{said}; " + (f"heard \"{heard}\"{when}" if op != "del" or heard else
                                                   f"not heard; it belongs{when}"))
        if op == "sub":
            title += f" (for \"{' '.join(o['ref'] for o in group if o['ref'])}\")"
    else:
        word = first["hyp"] if op in ("ok", "sub", "ins") else first["ref"]
        title = {"ok": f"heard{when}", "sub": f"heard for \"{first['ref']}\"{when}",
                 "del": f"not heard; it belongs{when}", "ins": f"heard, not in the text{when}"}[op]
    seek = "" if s is None else f" data-seek='{s}'"
    return (f"<span class='gepard-w' data-op='{op}'{seek} title='{html.escape(title, quote=True)}'>"
            f"{html.escape(word or '')}</span>")


def words_html(ops: list[dict], player: str = "#eval-failed-audio", note: str = "") -> str:
    spans = [_span(group) for group in groups(ops)]
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
