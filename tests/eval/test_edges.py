"""Evaluation edge cases: one text rule for every engine, --out naming a file, and Piper as a
deterministic reference whose report lists only what it used."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tests.support.eval_fixtures import rows_of

from eval.cli import main


def write_set(path, items):
    path.write_text("".join(json.dumps({"id": i, "text": t, "category": "c"}) + "\n" for i, t in items))
    return path


@pytest.mark.parametrize("engine", ["local", "local-stream"])
def test_text_over_the_limit_is_a_row_error_and_the_run_goes_on(tmp_path, tiny_cache_dir, engine, capsys):
    long = ("This sentence is long. " * 250)[:5000]
    s = write_set(tmp_path / "s.jsonl", [("short-1", "Hello there."), ("huge", long), ("short-2", "Good bye.")])
    out = tmp_path / engine
    rc = main(["run", "--engine", engine, "--model", "tiny", "--model-cache", str(tiny_cache_dir), "--set", str(s),
               "--out", str(out), "--max-frames", "6", "--batch-size", "2"])
    assert rc == 0
    assert [r["id"] for r in rows_of(out)] == ["short-1", "short-2"]
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert errors == [{"id": "huge", "category": "c", "chars": 5000,
                       "error": "The text is 5000 characters long; the limit is 2000. Please shorten it."}]
    status = json.loads((out / "status.json").read_text())
    assert status == {"done": 3, "errors": 1, "total": 3, "complete": True}
    assert "1 utterance(s) refused before synthesis" in (out / "report.md").read_text()
    # Resuming does not retry it, and says nothing is left.
    assert main(["run", "--out", str(out)]) == 0
    assert len(rows_of(out)) == 2 and len((out / "errors.jsonl").read_text().splitlines()) == 1


def test_out_naming_a_file_is_exit_2_with_a_message(tmp_path, capsys):
    f = tmp_path / "a-file"
    f.write_text("keep me")
    assert main(["run", "--out", str(f), "--model", "tiny"]) == 2
    assert "is a file, not a run folder" in capsys.readouterr().err
    assert f.read_text() == "keep me"


@pytest.mark.slow
def test_piper_is_deterministic_and_its_report_lists_only_what_it_used(tmp_path):
    from eval.engines.piper import PiperReference
    from eval.engines.request import SynthesisItem
    from eval.report.markdown import make_report
    from eval.runs.run import RunConfig, run

    piper = PiperReference.load()
    reqs = [("The quick brown fox jumps over the lazy dog.", 1), ("Please call me back tomorrow.", 2)]
    items = [SynthesisItem(text, seed) for text, seed in reqs]
    first = piper.synthesize(items, None, _no_shaping())
    again = piper.synthesize(list(reversed(items)), None, _no_shaping())[::-1]  # another order, same text
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.audio, b.audio)
    s = write_set(tmp_path / "p.jsonl", [("p1", reqs[0][0])])
    out = run(RunConfig(engine="piper", model="en_US-joe-medium", set=str(s)), tmp_path / "piper", engine=piper,
              log=lambda m: None)
    report = make_report(out).read_text()
    assert "temperature" not in report and "batch size" not in report and "base seed" not in report
    assert "takes none of Gepard's sampling" in report and "noise off" in report


def _no_shaping():
    from gepard_demo.settings import StreamSettings

    return StreamSettings()
