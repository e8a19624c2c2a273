"""How long `python -m eval compare` takes on two scored 210-utterance runs (issue 27's target: at
most 30 s on 2 vCPU, the bootstrap included).

The runs are real, built once into --work: Piper speaking the `core` set (210 utterances, 10
categories), scored with Whisper tiny.en, the audio measures and DNSMOS (every measure the
comparison has); and the same WAVs read back through `--engine files` with every 7th one cut to
its first 40%, so WER, the failure entries and the audio measures all differ. Then the command
runs in a fresh process, as CI runs it (imports included), with a gate of what Piper's rows have
(the example gate's, less runaway: Piper has no frame budget), and the same
work is timed in parts in this process: the paired tables and every delta with its 1000
bootstrap replicates, overall and per category, and the folder (compare.md / .json, two charts).

    flock /tmp/gepard-heavy.lock python benchmarks/compare_speed.py [--work /tmp/gepard-compare-bench] [--repeat 3]
--quick: the `smoke` set (6 utterances, each cut: 6 pairs show no breach otherwise), no DNSMOS, one run of the command.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quick import add_quick  # noqa: E402

TARGET_S = 30.0


def build(work: Path, utterances: str = "core", cut_every: int = 7, dnsmos: bool = True) -> tuple[Path, Path]:
    """The two scored runs (kept between invocations: they take minutes to make, not to compare)."""
    import soundfile as sf

    from eval.cli import main

    base, new, cut = work / "piper", work / "cut", work / "cut-wavs"
    scored = "report.md"  # what a run writes last
    measures = ["--asr", "faster-whisper", "--dnsmos", "on" if dnsmos else "off"]
    if not (base / scored).is_file():
        assert main(["run", "--engine", "piper", "--set", utterances, "--out", str(base), *measures]) == 0
    if not (new / scored).is_file():
        cut.mkdir(parents=True, exist_ok=True)
        for k, wav in enumerate(sorted((base / "wav").glob("*.wav"))):
            audio, rate = sf.read(wav, dtype="int16")
            kept = audio[: int(len(audio) * 0.4)] if k % cut_every == 0 else audio
            sf.write(cut / wav.name, kept, rate, subtype="PCM_16")
        assert main(["run", "--engine", "files", "--files", str(cut), "--set", utterances, "--out", str(new),
                     *measures]) == 0
    return base, new


GATE = """overall: {{corpus_wer: 0.005, catastrophic: 0.02, loop: 0{dnsmos}}}
categories:
  "*": {{corpus_wer: 0.01}}
  short_1_3_words: {{corpus_wer: 0.03}}
"""


def command_s(base: Path, new: Path, out: Path, gate: Path) -> tuple[float, int]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "eval", "compare", str(base), str(new), "--gate", str(gate), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"compare failed (exit {p.returncode}):\n{p.stderr}")
    return time.perf_counter() - t0, p.returncode


def parts_s(base: Path, new: Path, out: Path, gate: Path) -> dict[str, float]:
    from eval.compare.folder import write_folder
    from eval.compare.gate import Gate
    from eval.compare.table import ALL, MEASURES, common_tag, compare_runs, paired_table

    t0 = time.perf_counter()
    tag = common_tag(base, new)
    paired_table(base, new, tag)
    t1 = time.perf_counter()
    c = compare_runs(base, new, tag)  # the tables again, then every delta (1000 replicates each)
    t2 = time.perf_counter()
    write_folder(out, [c], Gate.load(gate))
    t3 = time.perf_counter()
    n_deltas = sum(len(ds) for ds in c.deltas.values())
    print(f"  {c.pairs} pairs, {len(c.categories)} categories, {n_deltas} deltas "
          f"({len(c.deltas[ALL])} of {len(MEASURES)} measures overall)")
    return {"tables": t1 - t0, "tables + deltas (bootstrap)": t2 - t1, "folder (md, json, 2 charts)": t3 - t2}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=None, help="where the runs are kept (default /tmp/gepard-compare-bench, "
                    "a quick run's /tmp/gepard-compare-bench-quick: its runs are another set's)")
    ap.add_argument("--repeat", type=int, default=3)
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.repeat = 1
    work = Path(args.work or f"/tmp/gepard-compare-bench{'-quick' if args.quick else ''}")
    t = time.perf_counter()
    # A quick run: 6 pairs show a breach only when every one is cut; DNSMOS is most of its time.
    base, new = build(work, "smoke", cut_every=1, dnsmos=False) if args.quick else build(work)
    print(f"runs ready in {time.perf_counter() - t:.0f} s ({work})")
    gate = work / "gate.yaml"
    gate.write_text(GATE.format(dnsmos="" if args.quick else ", dnsmos_ovrl: 0.1"))
    wall, code = zip(*(command_s(base, new, work / f"compare-{k}", gate) for k in range(args.repeat)))
    print("\n| step | seconds |\n| --- | ---: |")
    for name, s in parts_s(base, new, work / "compare-parts", gate).items():
        print(f"| {name} | {s:.2f} |")
    median = statistics.median(wall)
    print(f"| `python -m eval compare` end to end (fresh process, median of {args.repeat}) | {median:.2f} |")
    print(f"\nexit code {code[0]} (1: the cut WAVs breach the gate, as they should); "
          f"runs {', '.join(f'{w:.1f}' for w in wall)} s; target {TARGET_S:.0f} s: "
          f"{median / TARGET_S:.2f} of it ({'ok' if median <= TARGET_S else 'OVER'})")
    return 0 if (median <= TARGET_S or args.quick) and code[0] == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
