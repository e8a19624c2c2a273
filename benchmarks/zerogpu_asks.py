"""What each ZeroGPU call of a Generate asks for, typical requests side by side: the calls as they
are now, each making the playing segment and the next ones as rows of one batch (gepard_demo/
zerogpu/budget.py `GpuBudget.plan`), against one call per segment (how a Generate ran before issue
34: the same budget with one row a call), and against the former whole-budget ask (one call for
the whole utterance: start + every segment's frame budget); how many such Generates a free
account's 3.5 min a day allows.

Each call is planned from where the previous one left the text: a segment that stops is taken to
stop at its expected length (0.7 + 0.4 s a word), one that never stops runs to its frame budget.
ZeroGPU refuses a call whose ask exceeds what the visitor has left, and bills the time used; the
"Generates a day" columns assume each call uses all it asks (the worst case: a shorter call gives
the rest back). Kokoro's Space, for comparison, asks 10-30 s a call, one call per sentence.

    .venv/bin/python benchmarks/zerogpu_asks.py [--start-s 10] [--max-rows 4]   (a Markdown table, then JSON)
--quick: the same run (it plans, runs no model: under a second either way).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.streaming.text_input import split_text  # noqa: E402
from gepard_demo.units import FRAME_RATE_HZ, expected_speech_s, word_count  # noqa: E402
from gepard_demo.zerogpu.budget import GpuBudget, Made  # noqa: E402
from quick import add_quick  # noqa: E402

FREE_QUOTA_S = 210  # 3.5 min a day on a free account (hub docs, facts §12)
SENTENCE = "The weather is sunny today, with a light breeze from the west."


def paragraph(chars: int) -> str:
    text, k = "", 0
    while len(text) < chars - 60:
        k += 1
        text += f"Sentence number {k} says a few more words about the weather. "
    return text.strip()


def calls(budget: GpuBudget, text: str, sampling: SamplingSettings, stops: bool, start_s: float) -> list[int]:
    """Each call's ask, call after call as GpuSession makes them: a call makes frames for the
    segments its plan covers; the session then reads on through the segments that ended and hands
    over at the first that did not (its frames read), or where the call's segments end (what the
    next segment has was made ahead, not read)."""
    segments = split_text(text)
    need = [sampling.max_frames if not stops else min(sampling.max_frames, math.ceil(expected_speech_s(word_count(seg)) * FRAME_RATE_HZ))
            for seg in segments]
    made: dict[int, int] = {}
    first, read, asks = 0, 0, []
    while first < len(segments):
        plan = budget.plan(segments, sampling, first,
                           {j: Made(n, n >= need[j], read if j == first else 0) for j, n in made.items()}, start_s)
        asks.append(plan.ask_s)
        for j, frames in plan.allotted().items():
            made[j] = min(need[j], made.get(j, 0) + frames)
        first = plan.first
        while first in plan.segments and made[first] >= need[first]:
            first += 1
        read = made.get(first, 0) if first in plan.segments else 0
        made = {j: n for j, n in made.items() if j >= first}
    return asks


def whole_budget_ask(budget: GpuBudget, text: str, sampling: SamplingSettings, start_s: float) -> int:
    """The former single call: start + every segment's whole frame budget (guided rows included)."""
    frames = len(split_text(text)) * sampling.max_frames
    guided = 0 if not sampling.guided else frames if sampling.cfg_frames is None else min(frames, sampling.cfg_frames)
    return math.ceil(start_s + budget.frames_s(frames, guided))


def per_day(asks: list[int]) -> int:
    return FREE_QUOTA_S // sum(asks) if sum(asks) else 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--start-s", type=float, default=GpuBudget().start_s, help="the cold start budgeted for")
    ap.add_argument("--max-rows", type=int, default=GpuBudget().max_rows, help="segments one call makes together")
    add_quick(ap)
    args = ap.parse_args()
    b = replace(GpuBudget(), max_rows=args.max_rows)
    per_segment = replace(b, max_rows=1)  # before issue 34: one call a segment
    plain = SamplingSettings()  # the page's defaults: 1000 frames a segment
    guided = plain.replace(cfg_scale=2.5)
    cases = [("Hello.", "Hello.", plain, True), ("a sentence (12 words)", SENTENCE, plain, True),
             ("a sentence, CFG 2.5 on every frame", SENTENCE, guided, True),
             ("a sentence that never stops (1000-frame budget)", SENTENCE, plain, False),
             ("350 characters (one segment)", paragraph(400), plain, True),
             ("1970 characters (6 segments)", paragraph(2000), plain, True),
             ("1970 characters, CFG 2.5", paragraph(2000), guided, True),
             ("1970 characters that never stop", paragraph(2000), plain, False)]
    rows = []
    for name, text, s, stops in cases:
        asks = calls(b, text, s, stops, args.start_s)
        before = calls(per_segment, text, s, stops, args.start_s)
        old = whole_budget_ask(b, text, s, args.start_s)
        rows.append({"request": name, "calls": len(asks), "largest_ask_s": max(asks), "asks_s": asks,
                     "total_asked_s": sum(asks), "generates_per_free_day": per_day(asks),
                     "per_segment_calls": len(before), "per_segment_asks_s": before,
                     "per_segment_total_asked_s": sum(before), "per_segment_generates_per_free_day": per_day(before),
                     "former_single_ask_s": old,
                     "former_generates_per_free_day": FREE_QUOTA_S // old if old <= FREE_QUOTA_S else 0})
    print("| request | calls: one a segment -> batched | asked in all: one a segment -> batched | largest ask | "
          "a free day allows | former single ask |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['request']} | {r['per_segment_calls']} -> {r['calls']} | "
              f"{r['per_segment_total_asked_s']} s -> {r['total_asked_s']} s | {r['largest_ask_s']} s | "
              f"{r['per_segment_generates_per_free_day']} -> {r['generates_per_free_day']} | "
              f"{r['former_single_ask_s']} s |")
    print(json.dumps({"start_s": args.start_s, "max_rows": args.max_rows, "free_quota_s": FREE_QUOTA_S,
                      "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
