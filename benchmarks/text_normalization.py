"""The text normalisers side by side (issue 65) on NeMo-text-processing's evaluation data
(tests/data/text_normalization/, CC-BY 4.0): GoogleTN.json's first 150 rows whose text changes,
scored as exact match after lower-casing and dropping punctuation and hyphens, by semiotic class
(the written text's first class below, by pattern), with the share of rows whose reading still
has a digit or a currency, percent, degree, at or slash sign, the median time per sentence (each
sentence's best of 3) and the first use (loading the grammars, and the first sentence); then EngConf.txt's ambiguous tokens (a row is
right when the output equals a reading labelled 1).

Candidates: the text as written (today); `wetext` 0.1.8 when installed (not a requirement);
NeMo's Normalizer on whole sentences (the library alone); and ours: `rules` (our layer alone) and
`nemo` (our layer, then NeMo on the windows that need it: gepard_demo/text/).

    .venv/bin/python benchmarks/text_normalization.py        # a minute, with NeMo's grammars cached
--quick: 20 rows of each file; the same candidates.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.quick import add_quick  # noqa: E402
from gepard_demo.text.front_end import FrontEnd, default_cache_dir  # noqa: E402

DATA = ROOT / "tests" / "data" / "text_normalization"
ROWS = 150
REPEATS = 3
# What a reading must not leave: a digit, or a currency, percent, degree, at or slash sign.
UNREAD = re.compile(r"[\d$€£¥%°@/]")
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
# The class of a row: the first whose pattern its written text matches.
CLASSES = (
    ("telephone", re.compile(r"\b\d{3}[-.]\d{4}\b")),
    ("money", re.compile(r"[$€£¥]\s?\d")),
    ("time", re.compile(r"\b\d{1,2}:\d\d\b|\b\d{1,2} ?[ap]\.?m\b", re.I)),
    ("date", re.compile(rf"\b{_MONTH} \d|\b\d{{1,2}} {_MONTH}|\b\d{{4}}-\d\d-\d\d\b")),
    ("measure", re.compile(r"\d ?(?:%|km|kg|mm|cm|m|mi|ft|lb|μm|°|mph|sq)\b|\d ?%")),
    ("range", re.compile(r"\d ?[-–] ?\d")),
    ("ordinal", re.compile(r"\b\d+(?:st|nd|rd|th)\b")),
    ("decimal", re.compile(r"\d\.\d")),
    ("year / cardinal", re.compile(r"\d")),
    ("letters / abbreviation", re.compile(r"\b[A-Z]{2,}\b|\b[A-Z][a-z]*\.")),
    ("other", re.compile(r"")),
)
_SCORE_DROP = re.compile(r"[^\w\s']|_|-")


def score_form(text: str) -> str:
    return " ".join(_SCORE_DROP.sub(" ", text.lower()).split())


def class_of(text: str) -> str:
    return next(name for name, pattern in CLASSES if pattern.search(text))


def google_rows(n: int) -> list[tuple[str, str]]:
    lines = (DATA / "GoogleTN_changed300.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    return [(r["text"], r["gt_normalized"]) for r in map(json.loads, lines)]


def engconf_rows(n: int) -> list[tuple[str, set[str]]]:
    rows, raw, good = [], None, set()
    for line in (DATA / "EngConf.txt").read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if raw is not None and good:
                rows.append((raw, good))
            raw, good = None, set()
        elif line.endswith("~~RAW"):
            raw = line[:-5]
        elif line.endswith("~~1"):
            good.add(score_form(line[:-3]))
    return rows[:n]


def candidates(cache: Path):
    """(name, load, normalise) each: load() and the first sentence are the first use, timed once;
    each candidate has a front end of its own, so none inherits another's loaded grammars."""
    front, ours = FrontEnd(cache), FrontEnd(cache)
    out = [("as written (today)", lambda: None, lambda s: s)]
    try:
        import wetext  # noqa: F401
        box = {}
        out.append(("wetext 0.1.8", lambda: box.setdefault("n", wetext.Normalizer(lang="en", operator="tn")),
                    lambda s: box["n"].normalize(s)))
    except ImportError:
        print("(wetext not installed: left out)")
    out += [("NeMo 1.2.0, whole sentences", front.nemo.load, front.nemo.sentence),
            ("ours: rules", lambda: None, lambda s: ours.spoken(s, "rules")),
            ("ours: nemo (rules + NeMo on windows)", ours.nemo.load, lambda s: ours.spoken(s, "nemo"))]
    return out


def measure(name, load, normalise, google, engconf) -> dict:
    t0 = time.perf_counter()
    load()
    normalise(google[0][0])
    first = time.perf_counter() - t0
    right, total, times, unread = defaultdict(int), defaultdict(int), [], 0
    for text, truth in google:
        took = []
        for _ in range(REPEATS):  # a sentence's best of REPEATS: a busy host's stalls are not its cost
            t0 = time.perf_counter()
            said = normalise(text)
            took.append(time.perf_counter() - t0)
        times.append(min(took))
        cls = class_of(text)
        total[cls] += 1
        right[cls] += score_form(said) == score_form(truth)
        unread += bool(UNREAD.search(said))
    conf = sum(score_form(normalise(raw)) in good for raw, good in engconf)
    return {"name": name, "first_s": first, "median_ms": 1000 * statistics.median(times), "unread": unread / len(google),
            "right": dict(right), "total": dict(total), "engconf": conf / max(1, len(engconf))}


def table(results: list[dict]) -> str:
    classes = [c for c, _ in CLASSES if c in results[0]["total"]]
    head = ["", "all"] + [f"{c} ({results[0]['total'][c]})" for c in classes] + ["unread left", "EngConf", "median / sentence", "first use"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        n = sum(r["total"].values())
        cells = [r["name"], f"{100 * sum(r['right'].values()) / n:.0f}%"]
        cells += [f"{100 * r['right'].get(c, 0) / r['total'][c]:.0f}%" for c in classes]
        cells += [f"{100 * r['unread']:.0f}%", f"{100 * r['engconf']:.0f}%", f"{r['median_ms']:.2f} ms", f"{r['first_s']:.1f} s"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grammar-cache", type=Path, default=default_cache_dir(),
                   help="NeMo's compiled grammars (built there on first use when absent)")
    p.add_argument("--compile", action="store_true", help="also time compiling NeMo's grammars with no cache")
    add_quick(p)
    args = p.parse_args(argv)
    n = 20 if args.quick else ROWS
    google, engconf = google_rows(n), engconf_rows(n)
    built = args.grammar_cache.is_dir() and any(args.grammar_cache.glob("*.far"))
    print(f"{len(google)} GoogleTN rows, {len(engconf)} EngConf rows; NeMo grammars "
          f"{'cached' if built else 'compiled on first use'} in {args.grammar_cache}")
    if args.compile:
        with tempfile.TemporaryDirectory() as empty:
            t0 = time.perf_counter()
            FrontEnd(empty).nemo.load()
            print(f"NeMo's grammars compiled from nothing: {time.perf_counter() - t0:.0f} s")
    results = [measure(*c, google, engconf) for c in candidates(args.grammar_cache)]
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
