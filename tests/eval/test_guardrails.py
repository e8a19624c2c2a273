"""The guardrails and the probe through `python -m eval run` on the tiny model: what a row says
about how it ended and its probe traces (checked against the engine's own result for the same
seed), the refusals (bad settings, "auto" on a wordless text, --text-repetition off where it
changes nothing), the run identity, and the served engine's refusal and done-event fields."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
from tests.support.eval_fixtures import rows_of

from eval.cli import main
from eval.engines.served import GepardServer, ServerError, extensions_for
from eval.engines.request import SynthesisItem
from eval.runs.run import RunConfig, run
from eval.runs.seeds import utterance_seed
from gepard_demo.serving.protocol import delta_event, sse_event
from gepard_demo.settings import SamplingSettings, StreamSettings


def _run(tiny_cache_dir, out, *extra) -> int:
    return main(["run", "--model", "tiny", "--model-cache", str(tiny_cache_dir), "--out", str(out), "--seed", "7",
                 *extra])


@pytest.mark.slow
def test_rows_say_how_they_ended_and_carry_the_probe(tiny_cache_dir, tiny_engine, tmp_path):
    out = tmp_path / "r"
    assert _run(tiny_cache_dir, out, "--set", "smoke", "--limit", "3", "--max-frames", "80",
                "--force-stop-frames", "25", "--batch-size", "1") == 0
    rows = rows_of(out)
    for r in rows:
        # the same utterance straight from the engine: the row must say what it did
        want = tiny_engine.generate([r["text"]], SamplingSettings(max_frames=80, force_stop_frames=25,
                                                                 seed=utterance_seed(7, r["id"])))[0]
        assert (r["frames"], r["ended_by"], r["force_stopped"], r["runaway"]) == \
            (want.num_frames, want.ended_by, want.ended_by == "force_stop", want.ended_by != "stop")
        assert r["force_stop"] == 25
        assert r["entropy"] == [round(h, 4) for h in want.entropy] and len(r["entropy"]) == len(r["p_stop"])
        assert r["nll"] == [round(x, 4) for x in want.nll] and len(r["nll"]) == r["frames"]
        assert r["entropy_onset"] == round(float(np.mean(want.entropy[:10])), 4)
        assert r["entropy_settled"] is None  # under 60 frames: no settled window
    assert {r["ended_by"] for r in rows} >= {"force_stop"}
    summary = json.loads((out / "summary.json").read_text())["overall"]
    fs = [r["id"] for r in rows if r["ended_by"] == "force_stop"]
    assert summary["failures"]["force_stop"]["ids"] == fs
    assert set(fs) <= set(summary["failures"]["runaway"]["ids"])  # a force stop is a runaway the guard caught


def test_bad_guardrail_settings_are_exit_2_naming_the_field(tiny_cache_dir, tmp_path, capsys):
    for flags, field in ((["--repetition-penalty", "0.5"], "repetition_penalty"),
                         (["--repetition-penalty", "2.5"], "repetition_penalty"),
                         (["--repetition-window", "-1"], "repetition_window"),
                         (["--force-stop-frames", "0"], "force_stop_frames"),
                         (["--force-stop-frames", "200", "--max-frames", "100"], "force_stop_frames"),
                         (["--derail-fraction", "0"], "derail fraction"),
                         (["--derail-from", "15"], "derail judge_from")):
        assert _run(tiny_cache_dir, tmp_path / "x", "--set", "smoke", *flags) == 2, flags
        assert field in capsys.readouterr().err, flags
    assert not (tmp_path / "x" / "config.json").exists()
    assert main(["sweep", "--out", str(tmp_path / "s"), "--axis", "repetition_penalty=1.0,0.9"]) == 2
    assert "repetition_penalty must be in [1, 2]" in capsys.readouterr().err
    assert main(["sweep", "--out", str(tmp_path / "s"), "--axis", "force_stop_frames=off,soon"]) == 2
    assert "force_stop_frames must be 'off', 'auto' or a whole number of frames" in capsys.readouterr().err


@pytest.mark.slow
def test_auto_on_a_wordless_text_goes_to_errors_and_the_run_goes_on(tiny_cache_dir, tmp_path):
    s = tmp_path / "set.jsonl"
    # symbols the app speaks (it refuses only whitespace and punctuation), but no word to scale "auto" from
    s.write_text('{"id": "dots", "text": "\\u266a \\u266a", "category": "c"}\n{"id": "word", "text": "Hello there.", "category": "c"}\n')
    out = tmp_path / "r"
    assert _run(tiny_cache_dir, out, "--set", str(s), "--max-frames", "100", "--force-stop-frames", "auto") == 0
    assert [r["id"] for r in rows_of(out)] == ["word"]
    assert rows_of(out)[0]["force_stop"] == int(4.0 * (0.7 + 0.4 * 2) * 22050 / 1024)  # 129: "auto" of two words
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert [e["id"] for e in errors] == ["dots"] and "force_stop_frames 'auto'" in errors[0]["error"]
    # the same set with the force stop off: the symbols are speakable, so they are synthesized
    assert _run(tiny_cache_dir, tmp_path / "off", "--set", str(s), "--max-frames", "20") == 0
    assert [r["id"] for r in rows_of(tmp_path / "off")] == ["dots", "word"]


@pytest.mark.slow
def test_text_repetition_off_is_refused_where_it_changes_nothing(tiny_cache_dir, tmp_path, capsys):
    long = tmp_path / "long.txt"  # 25 and 30 tiny tokens: never repeated (tiny: below 13)
    long.write_text("Good morning, Doctor Nakamura.\nThe quick brown fox jumps over the lazy dog near the river bank today.\n")
    assert _run(tiny_cache_dir, tmp_path / "a", "--set", str(long), "--text-repetition", "off") == 2
    assert "would change nothing: no text of this set is short enough" in capsys.readouterr().err
    assert not (tmp_path / "a" / "config.json").exists()
    assert main(["run", "--engine", "piper", "--set", "smoke", "--text-repetition", "off", "--out", str(tmp_path / "p")]) == 2
    assert "--engine piper cannot honour it" in capsys.readouterr().err
    # smoke's "Hello." (3 tiny tokens) is repeated: off changes its prompt, so the run goes, and its identity says off
    out = tmp_path / "b"
    assert _run(tiny_cache_dir, out, "--set", "smoke", "--limit", "1", "--max-frames", "20", "--text-repetition", "off") == 0
    assert json.loads((out / "config.json").read_text())["run"]["sampling"]["text_repetition"] is False
    on = tmp_path / "on"
    assert _run(tiny_cache_dir, on, "--set", "smoke", "--limit", "1", "--max-frames", "20") == 0
    assert rows_of(out)[0]["p_stop"] != rows_of(on)[0]["p_stop"]  # another prompt, another utterance
    assert _run(tiny_cache_dir, out, "--set", "smoke", "--limit", "1", "--max-frames", "20", "--text-repetition", "on") == 2
    assert "different sampling" in capsys.readouterr().err


@pytest.mark.slow
def test_guardrails_are_part_of_the_identity_and_old_folders_resume(tiny_cache_dir, tmp_path, capsys):
    out = tmp_path / "r"
    args = ("--set", "smoke", "--limit", "2", "--max-frames", "20", "--repetition-penalty", "1.2")
    assert _run(tiny_cache_dir, out, *args) == 0
    assert _run(tiny_cache_dir, out, *args[:-1], "1.3") == 2
    assert "different sampling" in capsys.readouterr().err
    assert _run(tiny_cache_dir, out, *args[:-2], "--force-stop-frames", "auto", "--repetition-penalty", "1.2") == 2
    # a folder made before the guardrails existed: its saved sampling lacks them, and it resumes
    old = tmp_path / "old"
    assert _run(tiny_cache_dir, old, "--set", "smoke", "--limit", "2", "--max-frames", "20") == 0
    cfg = json.loads((old / "config.json").read_text())
    for k in ("repetition_penalty", "repetition_window", "force_stop_frames", "text_repetition"):
        del cfg["run"]["sampling"][k]
    (old / "config.json").write_text(json.dumps(cfg))
    lines = (old / "rows.jsonl").read_text().splitlines(keepends=True)
    (old / "rows.jsonl").write_text(lines[0])
    assert _run(tiny_cache_dir, old, "--set", "smoke", "--limit", "2", "--max-frames", "20") == 0
    assert len(rows_of(old)) == 2


def _vllm_like(posts: list):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            posts.append(request)
        return httpx.Response(200, json={"object": "list", "data": [{"id": "tiny", "object": "model"}]})
    return handler


def test_served_guardrails_are_refused_where_the_server_would_drop_them():
    posts = []
    server = GepardServer("http://vllm.invalid", transport=httpx.MockTransport(_vllm_like(posts)))
    for s in (SamplingSettings(repetition_penalty=1.2), SamplingSettings(force_stop_frames="auto")):
        with pytest.raises(ServerError, match="takes no guardrails"):
            server.synthesize([SynthesisItem("Hello.", 1)], s, StreamSettings())
    assert posts == []
    assert extensions_for([server], SamplingSettings(repetition_window=8)) == {}  # the window alone changes nothing


def test_served_rows_carry_what_our_server_says(tmp_path):
    """Our server's entry lists guardrails: the fields go with every request, and its done event's
    end and probe traces land in the rows."""
    bodies = []
    entropy = [1.5] * 10 + [0.5] * 55

    def ours(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "tiny", "guardrails": True, "probe": True}]})
        bodies.append(json.loads(request.content))
        pcm = (np.ones(64 * 1024, "<i2") * 100).tobytes()
        done = {"gepard": {"frames": 64, "stop_fired": False, "runaway": True, "seed": 1, "ended_by": "force_stop",
                           "force_stopped": True, "entropy": entropy, "nll": [0.25] * 64}}
        stream = delta_event(pcm, "pcm") + sse_event("speech.audio.done", done)
        return httpx.Response(200, content=iter([stream]), headers={"content-type": "text/event-stream"})

    engine = GepardServer("http://gepard.test:9", transport=httpx.MockTransport(ours))
    cfg = RunConfig(engine="server", model="tiny", limit=1, batch_size=1, server_urls=("http://gepard.test:9",),
                    sampling=SamplingSettings(max_frames=100, repetition_penalty=1.2, force_stop_frames=64))
    run(cfg, tmp_path / "r", engine=engine, log=lambda m: None)
    assert bodies[0]["repetition_penalty"] == 1.2 and bodies[0]["repetition_window"] == 32
    assert bodies[0]["force_stop_frames"] == 64
    r = rows_of(tmp_path / "r")[0]
    assert (r["ended_by"], r["force_stopped"], r["runaway"], r["frames"]) == ("force_stop", True, True, 64)
    assert r["entropy"] == entropy and r["nll"] == [0.25] * 64
    assert (r["entropy_onset"], r["entropy_settled"], r["entropy_drop"]) == (1.5, 0.5, 1.0)
    assert r["settings"]["guardrails"] == {"repetition_penalty": 1.2, "repetition_window": 32, "force_stop_frames": 64}


@pytest.mark.slow
def test_local_stream_rows_say_what_the_batched_ones_say(tiny_cache_dir, tmp_path):
    args = ("--set", "smoke", "--limit", "3", "--max-frames", "80", "--force-stop-frames", "25", "--batch-size", "1")
    assert _run(tiny_cache_dir, tmp_path / "b", *args) == 0
    assert _run(tiny_cache_dir, tmp_path / "s", *args, "--engine", "local-stream") == 0
    for b, s in zip(rows_of(tmp_path / "b"), rows_of(tmp_path / "s")):
        assert (s["frames"], s["ended_by"], s["force_stopped"], s["force_stop"]) == \
            (b["frames"], b["ended_by"], b["force_stopped"], b["force_stop"])
        assert len(s["entropy"]) == len(b["entropy"]) and len(s["nll"]) == len(b["nll"])
        assert np.allclose(s["entropy"], b["entropy"], atol=2e-3)
