"""--quick, the one flag every benchmark takes (tests/benchmarks/test_benchmarks.py runs each script with it).

A quick run proves that a script still works end to end, through the same functions its full run
measures, on the tiny model (never the full-size one), with fewer frames, rounds and sizes: seconds,
not minutes. Its figures mean nothing; the published ones are the full runs'. It exits non-zero
when what the script measures fails (a check, an error), and never for a speed target missed: a
tiny run on a small shared machine says nothing about those. Each script's docstring says in one
line what its --quick leaves out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "a check that this script still works, not a measurement: the tiny model, seconds (see its doc)"


def add_quick(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help=HELP)


def engine_for(quick: bool, tiny_dir: Path):
    """The talker a benchmark measures: Gepard-1.0's real shape with random weights (the tiny
    checkpoint's tokenizer), or in a quick run the tiny checkpoint itself."""
    from gepard_demo.model.checkpoints.full_size import build_full_size_engine
    from gepard_demo.model.engine import GepardEngine

    return GepardEngine.load(str(tiny_dir)) if quick else build_full_size_engine(tiny_dir)


def codec_for(quick: bool, seed: int = 0, device: str = "cpu"):
    """The full-size random NanoCodec, or in a quick run one of the tiny checkpoint's width."""
    from gepard_demo.codec import build_random_codec
    from gepard_demo.codec.tiny import TINY_DECODER_CHANNELS

    if quick:
        return build_random_codec(seed=seed, decoder_channels=TINY_DECODER_CHANNELS, device=device)
    return build_random_codec(seed=seed, device=device)
