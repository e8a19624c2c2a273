"""The docs name only what exists: every command's flags, every path in the repository, every
"facts §N" section. Read from the docs and checked against the real parsers and the tree, so a
renamed flag or a moved file fails here rather than in a reader's shell."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = [*sorted((ROOT / "gepard_demo").rglob("*.py")), *sorted((ROOT / "eval").rglob("*.py")), ROOT / "app.py"]


def _commands(text: str) -> list[tuple[str, str | None, list[str]]]:
    """(program, subcommand, flags) of each command line in `text`: `python -m gepard_demo SUB`,
    `python -m eval SUB` or `app.py`, continuation lines joined, up to a comment or a pipe."""
    text = re.sub(r"\\\n\s*", " ", text)
    out = []
    for m in re.finditer(r"(?:python -m (gepard_demo|eval) ([a-z][a-z-]*)|(app\.py))([^\n`#|&;)]*)", text):
        program = m.group(1) or "app"
        flags = re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", m.group(4))
        out.append((program, m.group(2), flags))
    return out


def _options(parser: argparse.ArgumentParser, sub: str | None) -> set[str] | None:
    if sub is not None:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if sub not in actions[0].choices:
            return None
        parser = actions[0].choices[sub]
    return {o for a in parser._actions for o in a.option_strings}


@pytest.fixture(scope="module")
def parsers() -> dict[str, argparse.ArgumentParser]:
    import app
    from eval.parser import build_parser as eval_parser
    from gepard_demo.__main__ import build_parser as demo_parser

    return {"gepard_demo": demo_parser(), "eval": eval_parser(), "app": app.build_parser({})}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_command_the_docs_show_parses(doc, parsers):
    bad = []
    for program, sub, flags in _commands(doc.read_text(encoding="utf-8")):
        options = _options(parsers[program], sub)
        if options is None:
            bad.append(f"{program} {sub}: no such subcommand")
            continue
        bad += [f"{program} {sub or ''} {f}: no such flag" for f in flags if f not in options]
    assert not bad, bad


def test_the_command_reader_sees_flags_and_unknown_ones(parsers):
    """The check above is only as good as its reader: it must find the flags of a continued line
    and report a flag that does not exist."""
    cmds = _commands("run `python -m eval run --set core \\\n  --out runs/x --bogus-flag 1` then\n"
                     ".venv/bin/python app.py --model tiny  # --not-this\n")
    assert cmds == [("eval", "run", ["--set", "--out", "--bogus-flag"]), ("app", None, ["--model"])]
    assert "--bogus-flag" not in _options(parsers["eval"], "run") and "--set" in _options(parsers["eval"], "run")


PATH = re.compile(r"(?<![\w./-])((?:docs|benchmarks|tests|gepard_demo|eval|\.ci)/[\w./*-]*\w)")


# FACTS.md names files of other repositories (gepard-train, the vLLM-Omni wheel, the Hub's docs).
@pytest.mark.parametrize("doc", [d for d in DOCS if d.name != "FACTS.md"], ids=lambda p: p.name)
def test_every_path_the_docs_name_exists(doc):
    missing = sorted({p for p in PATH.findall(doc.read_text(encoding="utf-8"))
                      if not any(ROOT.glob(p)) and not _is_output(p)})
    assert not missing, missing


def _is_output(path: str) -> bool:
    """Paths a command writes (a run folder, a chart), not files of the repository."""
    return path.startswith(("eval/runs/", "benchmarks/out")) and not (ROOT / path).parent.exists()


def test_every_facts_section_cited_exists():
    facts = (ROOT / "docs" / "FACTS.md").read_text(encoding="utf-8")
    sections = {int(n) for n in re.findall(r"^## (\d+)\.", facts, re.M)}
    cited = {}
    for f in [*DOCS, *CODE]:
        for n in re.findall(r"facts §(\d+)", f.read_text(encoding="utf-8")):
            cited.setdefault(int(n), os.path.relpath(f, ROOT))
    assert sections and set(cited) <= sections, {n: f for n, f in cited.items() if n not in sections}


def test_the_readme_stays_a_front_door():
    """README.md opens with the two commands and a quick start, and stays short enough to read
    at once (200 lines): the detail lives in docs/."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert "make demo" in text.split("## ")[0] and "make test" in text.split("## ")[0]
    assert text.index("## Quick start") < text.index("## As a Space")
