"""The first audio of a normalised Generate against an unnormalised one (issue 65's target: within
30 ms), side by side in one run: the page's example text through a SynthesisSession with
text_normalization off, rules and nemo (nemo where nemo_text_processing is installed), the modes
interleaved round by round so the host's load falls on each alike; the time to the first chunk
from before the session is made (the plan and the front end's reading are inside it), its median
per mode and the difference from off; and "typed as read" (the rules' reading typed in, off): the
same prompt as rules without the normaliser, which splits what normalising costs into the
normaliser's own time and the longer prompt's. Each mode runs once first, unmeasured (NeMo's grammars load
from the cache there, as a server's first request of that mode would).

Gepard-1.0's real shape with random weights on this CPU (the first chunk's frames and its decode
are the same in every mode: only the prompt's text differs), or in --quick the tiny checkpoint.

    .venv/bin/python benchmarks/first_audio_normalized.py            # a few minutes on 2 busy vCPU
--quick: the tiny model, 3 rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.quick import add_quick, codec_for, engine_for  # noqa: E402

TEXT = "Please call Dr. Smith at 555-0142 before 9:30 a.m. on Monday."


def first_audio_s(engine, codec, mode: str, text: str = TEXT) -> float:
    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.streaming.session import SynthesisSession

    sampling = SamplingSettings(seed=7, max_frames=12, text_normalization=mode)
    t0 = time.perf_counter()
    session = SynthesisSession(engine, codec, SessionRequest(text, sampling, StreamSettings(), request_start=t0))
    for _ in session:  # the first chunk is the measure; the rest is not
        break
    session.close()
    assert session.stats.ttfa_s is not None, "no audio came"
    return session.stats.ttfa_s


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_quick(p)
    p.add_argument("--rounds", type=int, default=None, help="rounds of every mode (default: 15; --quick: 3)")
    p.add_argument("--cache-dir", default=None, help="where tiny is built (its tokenizer; default: a fresh folder)")
    args = p.parse_args()
    from gepard_demo.model.checkpoints.tiny import ensure_tiny
    from gepard_demo.text.front_end import OFF, RULES, NEMO, library_available, shared

    rounds = args.rounds or (3 if args.quick else 15)
    tiny = ensure_tiny(Path(args.cache_dir or tempfile.mkdtemp(prefix="gepard-tiny-")))
    engine, codec = engine_for(args.quick, tiny), codec_for(args.quick)
    # "typed as read": the rules' reading typed in with normalisation off: the same prompt as
    # rules, so rules minus it is the normaliser's own cost, and it minus off the longer prompt's.
    read = shared().spoken(TEXT, RULES)
    runs = {OFF: (OFF, TEXT), "typed as read": (OFF, read), RULES: (RULES, TEXT)}
    runs.update({NEMO: (NEMO, TEXT)} if library_available() else {})
    print(f"text: {TEXT!r}; read as (rules): {read!r}")
    for mode, text in runs.values():
        first_audio_s(engine, codec, mode, text)  # unmeasured: warm-up, NeMo's grammars loaded
    times: dict[str, list[float]] = {m: [] for m in runs}
    for _ in range(rounds):
        for name, (mode, text) in runs.items():
            times[name].append(first_audio_s(engine, codec, mode, text))
    modes = list(runs)
    off = statistics.median(times[OFF])
    print(f"\n{'tiny model' if args.quick else 'real shape, random weights'}, {rounds} rounds, interleaved\n")
    # Paired: each round's difference from the same round's run (the modes ran back to back in it),
    # so load that moves between rounds falls out; vs "typed as read" is the normaliser's own cost.
    typed = times["typed as read"]
    print("| text_normalization | first audio, median | min | max | median - off | paired median - off "
          "| paired median - typed as read |")
    print("|---|---|---|---|---|---|---|")
    for mode in modes:
        t = times[mode]
        med = statistics.median(t)
        vs_off = statistics.median(a - b for a, b in zip(t, times[OFF]))
        vs_typed = statistics.median(a - b for a, b in zip(t, typed))
        print(f"| {mode} | {med * 1000:.1f} ms | {min(t) * 1000:.1f} ms | {max(t) * 1000:.1f} ms | "
              f"{(med - off) * 1000:+.1f} ms | {vs_off * 1000:+.1f} ms | {vs_typed * 1000:+.1f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
