"""`python -m gepard_demo` as a user runs it: a real subprocess, real files; and the defaults of
`serve` and `synth` with no flags, through the command's own main() (serve's uvicorn.run is caught,
so no port is bound)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cache_dir):
    env = {**os.environ, "GEPARD_CACHE_DIR": str(cache_dir), "GEPARD_MODEL": "tiny"}
    return subprocess.run([sys.executable, "-m", "gepard_demo", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def refusal(*args, cache_dir, monkeypatch, capsys) -> tuple[int, str]:
    """A refusal through the command's own main(), in this process: (exit code, stderr). The same
    parsing and checks as a subprocess, without a new interpreter importing torch for each one."""
    from gepard_demo.__main__ import main

    monkeypatch.setenv("GEPARD_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("GEPARD_MODEL", "tiny")
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = exit_.code
    return code, capsys.readouterr().err


def test_synth_writes_a_wav_and_one_json_line(tiny_cache_dir, tmp_path):
    out = tmp_path / "out.wav"
    proc = run_cli("synth", "Hello world, this is Gepard.", "-o", str(out), "--seed", "3",
                   "--max-frames", "40", "--silence-ms", "100", cache_dir=tiny_cache_dir)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    stats = json.loads(lines[-1])
    assert {"frames", "stop_fired", "stop_frame", "duration_s", "ttfa_s", "rtf"} <= stats.keys()
    assert 1 <= stats["frames"] <= 40 and stats["seed"] == 3 and stats["random_weights"] is True
    assert stats["stop_fired"] != stats["runaway"]
    audio, sr = sf.read(out)
    assert sr == 22050
    assert len(audio) == stats["frames"] * 1024 + round(0.1 * sr)
    assert abs(stats["duration_s"] - len(audio) / sr) < 1e-3


def test_synth_without_an_output_says_it_writes_nothing(tiny_cache_dir, tmp_path):
    proc = run_cli("synth", "Hello.", "--seed", "1", "--max-frames", "6", cache_dir=tiny_cache_dir)
    assert proc.returncode == 0, proc.stderr
    assert "no -o FILE: the audio is generated for its stats and not written" in proc.stderr
    row = json.loads(proc.stdout.splitlines()[-1])
    assert row["wav"] is None and row["traces"] is None and row["frames"] == 6


def test_synth_rejects_bad_settings_and_empty_text(tiny_cache_dir, monkeypatch, capsys):
    code, err = refusal("synth", "Hello", "--temperature", "-1", cache_dir=tiny_cache_dir, monkeypatch=monkeypatch,
                        capsys=capsys)
    assert code == 2 and "temperature" in err
    code, err = refusal("synth", "   ", cache_dir=tiny_cache_dir, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and "empty" in err.lower()


@pytest.mark.slow
def test_make_tiny_writes_the_published_layout(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gepard_demo", "make-tiny", str(tmp_path / "ck")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    names = {p.name for p in (tmp_path / "ck").iterdir()}
    assert {"config.json", "gepard_config.json", "model.safetensors", "tokenizer.json",
            "nemo-nano-codec-tiny.nemo"} <= names


@pytest.mark.slow
def test_synth_in_a_reference_voice_with_cfg(tiny_cache_dir, tmp_path):
    import numpy as np

    t = np.arange(22050 * 5) / 22050
    ref = tmp_path / "me.flac"
    sf.write(ref, (0.2 * np.sin(2 * np.pi * 150 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(np.float32), 22050)
    out = tmp_path / "out.wav"
    proc = run_cli("synth", "Say it in my voice.", "-o", str(out), "--seed", "3", "--max-frames", "20",
                   "--ref-audio", str(ref), "--cfg-scale", "2.5", "--cfg-frames", "20", cache_dir=tiny_cache_dir)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout.splitlines()[-1])
    assert stats["cfg_scale"] == 2.5 and stats["cfg_frames"] == 20
    assert abs(stats["ref_audio_s"] - 5.0) < 0.05 and stats["prefix_s"] > 0
    assert sf.info(out).frames == stats["frames"] * 1024
    silent = tmp_path / "silent.wav"
    sf.write(silent, np.zeros(22050 * 5, np.float32), 22050)
    proc = run_cli("synth", "Hello", "--ref-audio", str(silent), cache_dir=tiny_cache_dir)
    assert proc.returncode == 2 and "silent" in proc.stderr
    proc = run_cli("synth", "Hello", "--cfg-scale", "11", cache_dir=tiny_cache_dir)
    assert proc.returncode == 2 and "cfg_scale" in proc.stderr


@pytest.mark.slow
def test_synth_with_the_guardrails_says_how_it_ended_and_carries_the_probe(tiny_cache_dir, tmp_path):
    out = tmp_path / "out.wav"
    traces = tmp_path / "traces.json"
    proc = run_cli("synth", "Guard this sentence.", "-o", str(out), "--seed", "3", "--max-frames", "200",
                   "--stop-threshold", "0.99", "--repetition-penalty", "1.3", "--repetition-window", "0",
                   "--force-stop-frames", "auto", "--traces", str(traces), cache_dir=tiny_cache_dir)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.splitlines()[-1]
    # The line is the summary (it was ~17 KB of per-frame arrays); the traces are in their file.
    assert len(line) < 2000 and "nll" not in json.loads(line)
    row = {**json.loads(line), **json.loads(traces.read_text())}
    assert row["traces"] == str(traces) and row["wav"] == str(out)
    # auto for three words: int(4 x (0.7 + 0.4 x 3) s x 22050 / 1024 frames/s) = 163
    assert (row["frames"], row["ended_by"], row["force_stopped"], row["runaway"]) == (163, "force_stop", True, True)
    assert (row["repetition_penalty"], row["repetition_window"], row["force_stop_frames"]) == (1.3, 0, "auto")
    assert len(row["entropy"]) == len(row["nll"]) == 163
    onset = sum(row["entropy"][:10]) / 10
    settled = sum(row["entropy"][40:60]) / 20
    assert row["entropy_onset"] == pytest.approx(onset, abs=1e-3)
    assert row["entropy_drop"] == pytest.approx(onset - settled, abs=1e-3)
    assert sf.info(out).frames == 163 * 1024


@pytest.mark.parametrize("flags, field", [
    (["--repetition-penalty", "3"], "repetition_penalty"),
    (["--repetition-window", "-2"], "repetition_window"),
    (["--force-stop-frames", "50", "--max-frames", "40"], "force_stop_frames"),
    (["--force-stop-frames", "later"], "force_stop_frames"),
])
def test_synth_refuses_bad_guardrails_naming_the_field(tiny_cache_dir, flags, field, monkeypatch, capsys):
    code, err = refusal("synth", "Hello", *flags, cache_dir=tiny_cache_dir, monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and field in err, err


def test_synth_refuses_auto_on_a_text_without_words(tiny_cache_dir, monkeypatch, capsys):
    code, err = refusal("synth", "🙂 🙂", "--force-stop-frames", "auto", cache_dir=tiny_cache_dir,
                        monkeypatch=monkeypatch, capsys=capsys)
    assert code == 2 and "force_stop_frames" in err and "has none" in err


def test_serve_with_no_flags_listens_on_loopback_8091_with_the_checkpoints_settings(tiny_model_dir, monkeypatch):
    """`python -m gepard_demo serve` and nothing else (the model and its cache from the env): bound to
    127.0.0.1:8091 (loopback: not open to the network unless asked), 4 requests batched with
    real-time admission and codec batching, and the sampling the checkpoint's own
    gepard_config.json says (read here from the file), which /v1/models reports."""
    import uvicorn
    from fastapi.testclient import TestClient

    from gepard_demo.__main__ import main

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    monkeypatch.setenv("GEPARD_CACHE_DIR", str(tiny_model_dir.parent))
    monkeypatch.setenv("GEPARD_MODEL", "tiny")
    assert main(["serve"]) == 0
    app = served["app"]
    try:
        assert (served["host"], served["port"]) == ("127.0.0.1", 8091)
        batching = app.state.scheduler.settings
        assert (batching.max_batch, batching.admission, batching.codec_batching) == (4, "realtime", True)
        own = json.loads((tiny_model_dir / "gepard_config.json").read_text())
        model = TestClient(app).get("/v1/models").json()["data"][0]
        sampling = model["fixed_settings"]["sampling"]
        assert {k: sampling[k] for k in ("temperature", "stop_threshold", "max_frames")} == \
            {k: own[k] for k in ("temperature", "stop_threshold", "max_frames")}
        assert sampling["seed"] is None and sampling["cfg_scale"] == 1.0  # a fresh seed per request; no guidance
    finally:
        app.state.scheduler.close()


def test_synth_without_a_seed_uses_a_fresh_one_and_prints_it(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """`synth` with no --seed: each run draws its own seed and prints the one it used, so the
    printed seed given back as --seed makes the very same samples."""
    from gepard_demo.__main__ import main

    monkeypatch.setenv("GEPARD_CACHE_DIR", str(tiny_model_dir.parent))
    monkeypatch.setenv("GEPARD_MODEL", "tiny")
    runs = []
    for name, more in (("a", []), ("b", []), ("again", None)):
        args = ["synth", "Hello there, friend.", "-o", str(tmp_path / f"{name}.wav"), "--max-frames", "20",
                "--temperature", "1.0", "--stop-threshold", "0.999"]
        assert main(args + (more if more is not None else ["--seed", str(runs[0]["seed"])])) == 0
        runs.append(json.loads(capsys.readouterr().out.splitlines()[-1]))
    assert isinstance(runs[0]["seed"], int) and runs[0]["seed"] != runs[1]["seed"]  # fresh each time
    first, again = (sf.read(tmp_path / f"{n}.wav", dtype="int16")[0] for n in ("a", "again"))
    assert runs[2]["seed"] == runs[0]["seed"] and len(first) > 0 and (first == again).all()
    other = sf.read(tmp_path / "b.wav", dtype="int16")[0]
    assert len(other) != len(first) or not (other == first).all()  # another seed, other samples


@pytest.mark.slow
def test_synth_reads_a_chapter_from_a_text_file_and_names_a_file_that_is_not_utf8(tiny_cache_dir, tmp_path):
    part = ", ".join(["A long chapter read from a file"] * 11) + "."
    (tmp_path / "chapter.txt").write_text(f"{part} {part} {part}", encoding="utf-8")
    proc = run_cli("synth", "--text-file", str(tmp_path / "chapter.txt"), "--seed", "2", "--max-frames", "6",
                   "--stop-threshold", "0.99", "--look-ahead", "2", "-o", str(tmp_path / "out.wav"),
                   cache_dir=tiny_cache_dir)
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout.splitlines()[-1])
    assert row["segments"] == 3 and row["segment_frames"] == [6, 6, 6] and row["frames"] == 18
    assert sf.info(tmp_path / "out.wav").frames == 18 * 1024
    (tmp_path / "latin1.txt").write_bytes("D\xe9j\xe0 vu.".encode("latin-1"))
    proc = run_cli("synth", "--text-file", str(tmp_path / "latin1.txt"), cache_dir=tiny_cache_dir)
    assert proc.returncode == 2 and "latin1.txt is not UTF-8 text" in proc.stderr


@pytest.mark.slow
def test_synth_in_a_saved_voice_is_synth_with_its_clip(tiny_cache_dir, tiny_engine, tiny_model_dir, tmp_path):
    from tests.support.sound import voice_like, wav_bytes

    from gepard_demo.model.checkpoints.tiny import TINY_CODEC_FILE
    from gepard_demo.serving.voices import Upload, VoiceShelf
    from gepard_demo.voice.library import VoiceLibrary
    from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

    clip = wav_bytes(voice_like(4.0, seed=11))
    (tmp_path / "me.wav").write_bytes(clip)
    shelf = VoiceShelf(VoiceLibrary(tmp_path / "voices", reserved=("default",)),
                       SpeakerPrefixer.for_engine(tiny_engine, tiny_model_dir / TINY_CODEC_FILE))
    shelf.upload(Upload(clip, "me.wav", "audio/wav", "Narrator", "rec-7"))
    common = ("synth", "Say it in my voice.", "--seed", "3", "--max-frames", "20")
    saved = run_cli(*common, "-o", str(tmp_path / "saved.wav"), "--voice", "narrator",
                    "--voices-dir", str(tmp_path / "voices"), cache_dir=tiny_cache_dir)
    sent = run_cli(*common, "-o", str(tmp_path / "sent.wav"), "--ref-audio", str(tmp_path / "me.wav"),
                   cache_dir=tiny_cache_dir)
    assert saved.returncode == 0 and sent.returncode == 0, saved.stderr + sent.stderr
    assert (tmp_path / "saved.wav").read_bytes() == (tmp_path / "sent.wav").read_bytes()
    assert json.loads(saved.stdout.splitlines()[-1])["voice"] == "Narrator"
    proc = run_cli("synth", "Hello", "--voice", "nobody", "--voices-dir", str(tmp_path / "voices"), cache_dir=tiny_cache_dir)
    assert proc.returncode == 2 and "voice" in proc.stderr and "nobody" in proc.stderr
