"""`python -m gepard_demo normalize`: each line of standard input as the model will read it, one
line out for each line in, so a user can preview what will be said; `--build` compiles NeMo's
grammars into the cache once (`make setup` runs it, so a Space's first visitor does not wait).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .front_end import OFF, TEXT_NORMALIZATIONS, FrontEnd, default_cache_dir
from .lexicon import EMPTY, Lexicon, LexiconError, parse


def read_lexicon_file(path: Path | None, field: str = "--lexicon") -> Lexicon:
    """A lexicon file (PLS or "written = spoken" lines), or the empty lexicon for None;
    LexiconError naming `field` for one that cannot be read or used."""
    if path is None:
        return EMPTY
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LexiconError(f"{field} {path}: cannot be read ({e})", field) from None
    return parse(text, field)


def add_lexicon_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lexicon", type=Path, default=None, metavar="FILE",
                        help="a pronunciation lexicon applied to every text before normalisation: a W3C PLS file "
                             "with <alias> entries, or 'written = spoken' lines")


def add_normalize_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("normalize", help="print each line of standard input as the model will read it "
                                         "(--build: compile NeMo's grammars into the cache)")
    p.add_argument("--text-normalization", choices=TEXT_NORMALIZATIONS, default=OFF,
                   help="off: as written; rules: our own rules; nemo: ours, then NeMo's grammars")
    add_lexicon_flag(p)
    p.add_argument("--build", action="store_true", help="compile NeMo's grammars into the cache and exit")
    p.add_argument("--grammar-cache", type=Path, default=None,
                   help="NeMo's compiled grammars (default: text-normalization/nemo under --cache-dir)")
    return p


def run(args: argparse.Namespace, cache_root: str | None) -> int:
    cache = args.grammar_cache or default_cache_dir(cache_root)
    front = FrontEnd(cache, read_lexicon_file(args.lexicon))
    if args.build:
        t0 = time.perf_counter()
        front.nemo.load()
        print(f"NeMo's grammars ready in {cache} ({time.perf_counter() - t0:.1f} s)")
        return 0
    for line in sys.stdin:
        print(front.spoken(line.strip(), args.text_normalization) if line.strip() else "", flush=True)
    return 0
