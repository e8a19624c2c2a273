"""README.md's voice-cloning commands, run as written (only the server's port changed) against a
real server on the tiny checkpoint with a 5-s clip, so the doc cannot rot: a 5-s clip's base64 is
~290 KB, past Linux's 128 KB limit on one command-line argument, so a form that puts it in an
argument fails ("Argument list too long")."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import soundfile as sf
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (tiny_codec: fixture)
from tests.support.sound import voice_like, wav_bytes

from gepard_demo.model.checkpoints.tiny import TINY_CODEC_FILE
from gepard_demo.serving.protocol import DEFAULT_VOICE
from gepard_demo.serving.voices import VoiceShelf
from gepard_demo.settings import StreamSettings
from gepard_demo.voice.library import VoiceLibrary
from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

README = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Voice cloning, saved voices and guidance"
README_PORT = "localhost:8091"
CLIP_S = 5.0


def readme_commands() -> list[str]:
    """The section's shell commands that talk to a server (curl) or prepare its body (python3 -c),
    continuation lines joined; `synth` and `eval` lines are other jobs."""
    text = README.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text[text.index(SECTION):], re.S).group(1)
    commands = block.replace("\\\n", " ").splitlines()
    return [c for c in commands if c.startswith(("curl ", "python3 -c "))]


@pytest.fixture(scope="module")
def port(tiny_engine, tiny_codec, tiny_model_dir, tmp_path_factory):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    prefixer = SpeakerPrefixer.for_engine(tiny_engine, tiny_model_dir / TINY_CODEC_FILE)
    shelf = VoiceShelf(VoiceLibrary(tmp_path_factory.mktemp("voices"), reserved=(DEFAULT_VOICE,)), prefixer)
    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling().replace(max_frames=12),
                           StreamSettings(first_chunk_frames=4, chunk_frames=8), prefixer=prefixer, voices=shelf)
    with serve_in_thread(app, "readme-cloning") as p:
        yield p


@pytest.mark.skipif(shutil.which("curl") is None, reason="the README's commands need curl")
def test_the_readmes_voice_cloning_commands_work_as_written(port, tmp_path):
    commands = readme_commands()
    assert any("ref_audio" in c for c in commands) and any("audio_sample=@me.wav" in c for c in commands)
    clip = wav_bytes(voice_like(CLIP_S, seed=7))
    (tmp_path / "me.wav").write_bytes(clip)
    assert len(clip) * 4 / 3 > 128 * 1024  # its base64 would not fit in one argument
    outputs = []
    for command in commands:
        out = tmp_path / "out.wav"
        out.unlink(missing_ok=True)
        run = subprocess.run(["bash", "-c", command.replace(README_PORT, f"127.0.0.1:{port}")], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0 and not run.stderr, (command, run.returncode, run.stderr)
        if "-o out.wav" in command:  # curl -s exits 0 on a 400 too: the file must be the audio
            assert out.read_bytes()[:4] == b"RIFF", (command, out.read_bytes()[:300])
            assert sf.info(str(out)).frames > 0
        outputs.append(run.stdout)
    assert any('"narrator"' in o for o in outputs), outputs  # saved, then listed
