"""What each ZeroGPU call of a Generate asks for, typical requests side by side: the per-segment
calls sized by the text's expected length (gepard_demo/zerogpu/budget.py) against the former
whole-budget ask (one call for the whole utterance: start + every segment's frame budget), and how
many such Generates a free account's 3.5 min a day allows.

ZeroGPU refuses a call whose ask exceeds what the visitor has left, and bills the time used; the
"Generates a day" column assumes each call uses all it asks (the worst case: a shorter call gives
the rest back). Kokoro's Space, for comparison, asks 10-30 s a call, one call per sentence.

    .venv/bin/python benchmarks/zerogpu_asks.py [--start-s 10]   (prints a Markdown table and JSON)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.streaming.text_input import split_text  # noqa: E402
from gepard_demo.zerogpu.budget import GpuBudget, expected_speech_s  # noqa: E402

FREE_QUOTA_S = 210  # 3.5 min a day on a free account (hub docs, facts §12)
SENTENCE = "The weather is sunny today, with a light breeze from the west."


def paragraph(chars: int) -> str:
    text, k = "", 0
    while len(text) < chars - 60:
        k += 1
        text += f"Sentence number {k} says a few more words about the weather. "
    return text.strip()


def calls(budget: GpuBudget, text: str, sampling: SamplingSettings, stops: bool, start_s: float) -> list[int]:
    """Each call's ask: per segment, calls until its expected length is covered (the stop head
    fires there) or, when it never fires, until the frame budget."""
    asks = []
    for segment in split_text(text):
        need = sampling.max_frames if not stops else min(sampling.max_frames,
                                                         math.ceil(expected_speech_s(segment) * 21.5))
        done = 0
        while done < need:
            frames = budget.call_frames(segment, done, sampling, start_s)
            asks.append(budget.ask_s(frames, sampling, done, start_s))
            done += frames
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
    args = ap.parse_args()
    b, plain = GpuBudget(), SamplingSettings()  # the page's defaults: 1000 frames a segment
    guided = plain.replace(cfg_scale=2.5)
    cases = [("Hello.", "Hello.", plain, True), ("a sentence (12 words)", SENTENCE, plain, True),
             ("a sentence, CFG 2.5 on every frame", SENTENCE, guided, True),
             ("a sentence that never stops (1000-frame budget)", SENTENCE, plain, False),
             ("350 characters (one segment)", paragraph(400), plain, True),
             ("1970 characters (6 segments)", paragraph(2000), plain, True),
             ("1970 characters, CFG 2.5", paragraph(2000), guided, True)]
    rows = []
    for name, text, s, stops in cases:
        asks = calls(b, text, s, stops, args.start_s)
        old = whole_budget_ask(b, text, s, args.start_s)
        rows.append({"request": name, "calls": len(asks), "largest_ask_s": max(asks), "asks_s": asks,
                     "total_asked_s": sum(asks), "generates_per_free_day": per_day(asks),
                     "former_single_ask_s": old, "former_generates_per_free_day": FREE_QUOTA_S // old if old <= FREE_QUOTA_S else 0})
    print("| request | calls | largest ask | asked in all | a free day allows | former single ask | former, a day |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['request']} | {r['calls']} | {r['largest_ask_s']} s | {r['total_asked_s']} s | "
              f"{r['generates_per_free_day']} | {r['former_single_ask_s']} s | {r['former_generates_per_free_day']} |")
    print(json.dumps({"start_s": args.start_s, "free_quota_s": FREE_QUOTA_S, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
