"""Each regression's words, base against new: what was heard in each run against the text, every
error with its time (from both runs' word alignment, eval/runs/words.py), for compare.md.

One line a run: matched words as they are, `[a → b @1.2 s]` b heard for a, `[−a b @1.2 s]` words
not heard (where they belong), `[+a b @1.2–2.0 s]` words heard that the text does not have. The
text's words are as written on a read run (eval/scoring/word_alignment.py: "St.", not "saint")."""

from __future__ import annotations

from itertools import groupby

from eval.runs.words import load_words
from eval.scoring.word_alignment import text_words_of

MOST = 10


def _at(ops: list[dict]) -> str:
    times = [o for o in ops if o["s"] is not None]
    if not times:
        return ""
    a, b = times[0]["s"], times[-1]["e"]
    return f" @{a:.1f} s" if b is None or b - a < 0.05 else f" @{a:.1f}–{b:.1f} s"


def render(ops: list[dict] | None) -> str:
    """A run's words of one utterance in one line (see the module doc)."""
    if ops is None:
        return "(no word alignment: score the run again to add it)"
    out = []
    for op, group in groupby(ops, key=lambda o: o["op"]):
        g = list(group)
        if op == "ok":
            out.append(" ".join(o["hyp"] for o in g))
        elif op == "sub":
            out += [f"[{o.get('written', o['ref'])} → {o['hyp']}{_at([o])}]" for o in g]
        elif op == "del":
            out.append(f"[−{' '.join(text_words_of(g))}{_at(g)}]")
        else:
            out.append(f"[+{' '.join(o['hyp'] for o in g)}{_at(g)}]")
    return " ".join(out) or "(nothing heard)"


def word_diff_lines(comparison, most: int = MOST) -> list[str]:
    """compare.md's lines for the worse utterances (worst first, at most `most`)."""
    worse = comparison.worse_utterances[:most]
    if not worse:
        return []
    base, new = load_words(comparison.base, comparison.tag), load_words(comparison.new, comparison.tag)
    lines = ["", "Word diffs of the utterances that got worse (`[a → b]` b heard for a, `[−a]` not heard, "
                 "`[+b]` heard but not in the text; @ where in the audio):", ""]
    for w in worse:
        lines += [f"- **{w['id']}**",
                  f"  - base: {render((base.get(w['id']) or {}).get('ops'))}",
                  f"  - new: {render((new.get(w['id']) or {}).get('ops'))}"]
    return lines
