"""Where in time each failure happened, in words, from the row's word alignment (eval/runs/words.py).

For every utterance the failure table lists, each of its entries gets one line when its words can
say where:
- loop: the longest run of inserted words: 'a loop from 3.2 to 4.1 s over "in the park"';
- truncated, and a catastrophe that ends in lost words: the reference words deleted at the end,
  'the words lost after 2.3 s: "the park today"' (the time: where the last heard word ended);
- runaway: the words heard past the text's end, 'talking on past the text from 4.0 s: "..."';
- long_pause: the longest gap between two heard words, 'a 1.4 s pause between "park" and
  "today" (2.1-3.5 s)' (word edges sit on Silero's pauses: gepard_demo/alignment/refine.py), less
  the silence a <break> in the text asked for there, as the failure rule counts it;
- catastrophic: how many words are wrong and the first one, with its time;
- leading_silence / trailing_silence: the silence before the first / after the last heard word.
An entry whose words cannot tell (no transcript, a frame loop the transcript does not show, a
server error) gets no line. The text's words are quoted as written where the row was read
(text_normalization: "$5.50", not Whisper's normalized words; eval/scoring/word_alignment.py).
"""

from __future__ import annotations

import pandas as pd

from eval.report.failures import ENTRIES, flags
from eval.scoring.timing import asked_pauses, unasked_gaps
from eval.scoring.word_alignment import text_words_of

LONG_GAP_S = 1.0  # failures.py's LONG_PAUSE_S


def _t(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


def _quote(ops: list[dict], key: str) -> str:
    words = text_words_of(ops) if key == "ref" else [o[key] for o in ops if o[key]]
    return '"' + " ".join(words[:8]) + (" ..." if len(words) > 8 else "") + '"'


def _runs(ops: list[dict], op: str) -> list[list[dict]]:
    runs: list[list[dict]] = []
    cur: list[dict] = []
    for o in ops:
        if o["op"] == op:
            cur.append(o)
        elif cur:
            runs, cur = runs + [cur], []
    return runs + ([cur] if cur else [])


def loop_where(ops: list[dict]) -> str | None:
    runs = [r for r in _runs(ops, "ins") if len(r) >= 2]
    if not runs:
        return None
    r = max(runs, key=len)
    times = [o for o in r if o["s"] is not None]
    span = f"from {_t(times[0]['s'])} to {_t(times[-1]['e'])} s " if times else ""
    return f"a loop {span}over {_quote(r, 'hyp')}"


def lost_where(ops: list[dict]) -> str | None:
    tail: list[dict] = []
    for o in reversed(ops):
        if o["op"] == "del":
            tail.insert(0, o)
        elif o["op"] != "ins":
            break
    if not tail:
        return None
    return f"the words lost after {_t(tail[0]['s'])} s: {_quote(tail, 'ref')}"


def past_end_where(ops: list[dict]) -> str | None:
    tail: list[dict] = []
    for o in reversed(ops):
        if o["op"] != "ins":
            break
        tail.insert(0, o)
    if not tail:
        return None
    return f"talking on past the text from {_t(tail[0]['s'])} s: {_quote(tail, 'hyp')}"


def pause_where(ops: list[dict], min_s: float = LONG_GAP_S, asked: list[tuple[float, float]] | None = None) -> str | None:
    """The longest gap between heard words, less what the text's breaks asked for at its place
    (timing.unasked_gaps, on the words' spans as it runs on the VAD's)."""
    heard = [o for o in ops if o["hyp"] and o["s"] is not None and o["e"] is not None]
    left = unasked_gaps([(o["s"], o["e"]) for o in heard], asked or [])
    gaps = [(g, a, b) for g, a, b in zip(left, heard, heard[1:]) if g >= min_s]
    if not gaps:
        return None
    gap, a, b = max(gaps, key=lambda g: g[0])
    beyond = " beyond the break the text asked for" if gap < b["s"] - a["e"] - 1e-9 else ""
    return f'a {gap:.1f} s pause{beyond} between "{a["hyp"]}" and "{b["hyp"]}" ({_t(a["e"])}-{_t(b["s"])} s)'


def wrong_where(ops: list[dict]) -> str | None:
    wrong = [o for o in ops if o["op"] != "ok"]
    if not wrong:
        return None
    o = wrong[0]
    ref = o.get("written", o["ref"])
    what = {"sub": f'"{o["hyp"]}" heard for "{ref}"', "del": f'"{ref}" not heard',
            "ins": f'"{o["hyp"]}" added'}[o["op"]]
    n_ref = sum(x["ref"] is not None for x in ops)
    return f"{len(wrong)} word errors over {n_ref} words; the first at {_t(o['s'])} s: {what}"


def edge_where(ops: list[dict], audio_s: float | None, leading: bool) -> str | None:
    heard = [o for o in ops if o["hyp"] and o["s"] is not None]
    if not heard:
        return None
    if leading:
        return f'{heard[0]["s"]:.1f} s before the first word ("{heard[0]["hyp"]}")'
    if audio_s is None or pd.isna(audio_s):
        return None
    return f'{audio_s - heard[-1]["e"]:.1f} s after the last word ("{heard[-1]["hyp"]}", which ends at {_t(heard[-1]["e"])} s)'


def describe(entry: str, ops: list[dict], audio_s: float | None = None,
             asked: list[tuple[float, float]] | None = None) -> str | None:
    """One failure entry of one utterance, placed in time (None: its words cannot tell); asked:
    the pauses its text's breaks asked for (timing.asked_pauses)."""
    if entry == "loop":
        return loop_where(ops)
    if entry == "truncated":
        return lost_where(ops)
    if entry == "runaway":
        return past_end_where(ops) or loop_where(ops)
    if entry == "long_pause":
        return pause_where(ops, asked=asked)
    if entry == "catastrophic":
        return lost_where(ops) or loop_where(ops) or wrong_where(ops)
    if entry in ("leading_silence", "trailing_silence"):
        return edge_where(ops, audio_s, entry == "leading_silence")
    return None


def where_in_time(df: pd.DataFrame, words: dict[str, dict]) -> dict[str, dict[str, str]]:
    """{entry: {id: where}} for every failing utterance whose words say where."""
    if not words:
        return {}
    fl = flags(df)
    out: dict[str, dict[str, str]] = {}
    for i, row in df.iterrows():
        w = words.get(row["id"])
        if not w:
            continue
        audio_s = row.get("audio_s", row.get("duration_s"))
        for entry in ENTRIES:
            if fl.at[i, entry] is True:
                line = describe(entry, w["ops"], audio_s, asked_pauses(str(row.get("text") or "")))
                if line:
                    out.setdefault(entry, {})[row["id"]] = line
    return out
