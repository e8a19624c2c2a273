"""What a hostile upload costs the voice library (issue 62), side by side in one run.

1. A small compressed file holding a long silence (an hour of 8 kHz as FLAC, 89 KB): the time and
   the peak memory (tracemalloc) until `decode_audio` refuses it, against decoding a file of the
   bound's own length (60 s) whole, which it takes.
2. A library of 40 voices whose `ref_text` and `speaker_description` are at their bound: one
   lookup by name (what every request naming a voice does) with the listing kept, against one that
   reads every file's header (a fresh library, as every lookup did before).

    .venv/bin/python benchmarks/voice_uploads.py        # seconds
--quick: 10 minutes of silence, 5 voices, fewer rounds.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import soundfile as sf
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.voice.library import MAX_TEXT_CHARS, VoiceLibrary  # noqa: E402
from gepard_demo.voice.reference_audio import MAX_FILE_S, ReferenceAudioError, decode_audio  # noqa: E402
from quick import add_quick  # noqa: E402


def silence_flac(seconds: int, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", rate, 1, format="FLAC", subtype="PCM_16") as f:
        for _ in range(seconds // 60):
            f.write(np.zeros(rate * 60, np.int16))
    return buf.getvalue()


def cost(fn) -> tuple[float, float, str]:
    """(ms, peak MB, outcome) of one call, its allocations traced."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        fn()
        outcome = "decoded"
    except ReferenceAudioError as exc:
        outcome = f"refused: {exc}"
    ms = 1000 * (time.perf_counter() - t0)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return ms, peak, outcome


def lookups(folder: str, name: str, rounds: int, fresh: bool) -> float:
    """Median ms of one lookup by name: on a kept library, or a fresh one each time."""
    kept = VoiceLibrary(folder)
    kept.voices()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        (VoiceLibrary(folder) if fresh else kept).find(name)
        times.append(1000 * (time.perf_counter() - t0))
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_quick(p)
    args = p.parse_args()
    long_s, voices, rounds = (600, 5, 5) if args.quick else (3600, 40, 50)
    bomb = silence_flac(long_s)
    at_bound = silence_flac(int(MAX_FILE_S))
    bomb_ms, bomb_mb, bomb_outcome = cost(lambda: decode_audio(bomb))
    bound_ms, bound_mb, bound_outcome = cost(lambda: decode_audio(at_bound))
    print(f"| file | size | ms | peak MB | outcome |\n|---|---|---|---|---|\n"
          f"| {long_s} s of silence, FLAC | {len(bomb) / 1e3:.0f} KB | {bomb_ms:.1f} | {bomb_mb:.2f} | {bomb_outcome} |\n"
          f"| {MAX_FILE_S:g} s of silence, FLAC (the bound) | {len(at_bound) / 1e3:.0f} KB | {bound_ms:.1f} | "
          f"{bound_mb:.2f} | {bound_outcome} |")
    with tempfile.TemporaryDirectory() as folder:
        library = VoiceLibrary(folder)
        clip = np.zeros(22050 * 4, np.float32)
        for i in range(voices):
            library.add(f"V{i}", "rec", torch.zeros(8, 16), clip, 4.0, ref_text="w" * MAX_TEXT_CHARS,
                        speaker_description="d" * MAX_TEXT_CHARS)
        listing = len(json.dumps([v.listing() for v in library.voices()]))
        kept_ms = lookups(folder, f"v{voices - 1}", rounds, fresh=False)
        fresh_ms = lookups(folder, f"v{voices - 1}", rounds, fresh=True)
    print(f"\n| {voices} voices, texts at their bound | ms a lookup |\n|---|---|\n"
          f"| listing kept (re-read when the files change) | {kept_ms:.2f} |\n"
          f"| every header read (a fresh library) | {fresh_ms:.2f} |\n"
          f"| ratio | {fresh_ms / kept_ms:.0f}x |\n\nthe listing's JSON: {listing / 1e3:.0f} KB")
    if not bomb_outcome.startswith("refused") or bound_outcome != "decoded":
        sys.exit("the bound did not hold: the long file must be refused and the bound's own length decoded")


if __name__ == "__main__":
    main()
