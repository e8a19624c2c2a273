"""The house: imports point down the data path, no circles, no private names across packages,
short files. Read from the source with ast, so a new upward import fails here, not in review.

Layers, lowest first (docs/DESIGN.md says why each sits where it does). A module may import its
own layer and the layers below it; gepard_demo is below all of eval and never imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = [
    "gepard_demo.units", "gepard_demo.bounded", "gepard_demo.text", "gepard_demo.declare", "gepard_demo.settings", "gepard_demo.host_settings", "gepard_demo.settings_flags", "gepard_demo.codec", "gepard_demo.model",
    "gepard_demo.voice", "gepard_demo.batching", "gepard_demo.streaming", "gepard_demo.alignment", "gepard_demo.speed", "gepard_demo.zerogpu", "gepard_demo.serving",
    "gepard_demo.ui",
    "gepard_demo.__main__",
    "eval.jsonio", "eval.progress", "eval.scoring", "eval.engines", "eval.runs", "eval.charts", "eval.report", "eval.compare",
    "eval.listening", "eval.sweeps", "eval.load",
    "eval.ui", "eval.parser", "eval.cli", "eval.__main__",
]
MAX_LINES = 400


def modules() -> dict[str, Path]:
    out = {}
    for pkg in ("gepard_demo", "eval"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def unit(module: str) -> str:
    """The layer a module belongs to: its subpackage, or the top-level module itself."""
    parts = module.split(".")
    return ".".join(parts[:2])


def imports(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, imported names) for every import in the file, nested ones included."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if path.name == "__init__.py" else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            out.append((target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append((arg.value, []))
    return [(t, names) for t, names in out if t.split(".")[0] in ("gepard_demo", "eval")]


MODULES = modules()


def test_every_module_has_a_layer():
    assert {unit(m) for m in MODULES} - {"gepard_demo", "eval"} <= set(LAYERS)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module):
    if unit(module) in ("gepard_demo", "eval"):  # the packages' own __init__: names only
        assert not imports(module, MODULES[module]), f"{module} imports at package level"
        return
    mine = LAYERS.index(unit(module))
    upward = [t for t, _ in imports(module, MODULES[module]) if unit(t) in LAYERS and LAYERS.index(unit(t)) > mine]
    assert not upward, f"{module} imports {upward}, above its layer {unit(module)}"


def test_gepard_demo_never_imports_eval():
    offenders = {m: t for m in MODULES if m.startswith("gepard_demo") for t, _ in imports(m, MODULES[m])
                 if t.split(".")[0] == "eval"}
    assert not offenders


def test_no_import_cycles():
    graph = {m: {t for t, names in imports(m, f) for t in [t, *(f"{t}.{n}" for n in names)] if t in MODULES and t != m}
             for m, f in MODULES.items()}
    # A package's __init__ re-exporting its own modules is not a dependency of those modules.
    graph = {m: {t for t in ts if not (m.startswith(t + ".") or t.startswith(m + "."))} for m, ts in graph.items()}
    state: dict[str, int] = {}

    def visit(m, path):
        state[m] = 1
        for t in graph[m]:
            if state.get(t) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(t):] + [t]))
            if t not in state:
                visit(t, path + [t])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])


def test_no_private_names_across_packages():
    crossing = [f"{m}: from {t} import {n}" for m, f in MODULES.items() for t, names in imports(m, f)
                for n in names if n.startswith("_") and not n.startswith("__") and unit(t) != unit(m)]
    assert not crossing


def test_files_stay_short():
    long = {m: n for m, f in MODULES.items() if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long


def test_every_module_parses_as_python_3_10():
    """The Space runs on Python 3.10 (README "As a Space"): no 3.11-only syntax anywhere."""
    files = [*MODULES.values(), ROOT / "app.py", *sorted((ROOT / "benchmarks").glob("*.py"))]
    for f in files:
        ast.parse(f.read_text(encoding="utf-8"), filename=str(f), feature_version=(3, 10))


def test_no_module_needs_a_standard_library_newer_than_3_10():
    """Parsing as 3.10 misses a name the 3.10 library lacks (tomllib, typing.Self, datetime.UTC,
    enum.StrEnum...): vermin knows each one's first version, so the Space's Python is checked
    without a 3.10 interpreter here."""
    import subprocess
    import sys

    vermin = Path(sys.executable).with_name("vermin")
    run = subprocess.run([str(vermin), "-t=3.10-", "--no-tips", "--violations", "--no-parse-comments",
                          "gepard_demo", "eval", "app.py"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
