"""Reference voice audio: any common format, rate and channel count -> mono float32 at the
codec's rate (22050 Hz), checked against a documented length window.

Length window (REFERENCE_WINDOW): 3-15 s of sound, measured after trimming silence at both
ends. The authors trained the compressor on 3-15 s reference clips (`reference_sampling`
l_min_seconds 3.0, l_max_seconds 15.0 in their voice-cloning configs), so shorter clips carry
less speaker evidence than it ever saw and longer ones put frames at positions it never saw
(15 s is about 322 codec frames). We keep exactly the trained range instead of guessing how far
it stretches; trimming the edges first means a recording that starts with a second of
microphone silence is not refused for it.

Errors are ReferenceAudioError with a message a user can act on: unreadable or not audio,
silent, too short, too long.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Union

import numpy as np
import soundfile as sf
import soxr

from gepard_demo.units import SAMPLE_RATE

MAX_FILE_BYTES = 25 * 1024 * 1024  # a 15 s clip is ~2.6 MB even as 16-bit 44.1 kHz stereo WAV
# The longest file decoded: the window's 15 s of sound with room for silence at both ends. A file
# whose header says more is refused before its samples are read (a tiny FLAC can hold an hour).
MAX_FILE_S = 60.0
MAX_RATE = 384_000  # the highest rate a recorder writes; a header saying more is not audio we take
SILENCE_DBFS = -50.0  # a 20 ms window quieter than this counts as silence

# A Gradio Audio value as the page hands it over: a file path, a (rate, samples) pair from the
# microphone or an upload, or None (no reference: the default voice).
PageAudio = Union[str, Path, tuple[int, np.ndarray], None]
_WINDOW_S = 0.02


class ReferenceAudioError(ValueError):
    """The reference audio cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class ReferenceWindow:
    min_s: float = 3.0
    max_s: float = 15.0

    def describe(self) -> str:
        return f"{self.min_s:g}-{self.max_s:g} s of speech"


REFERENCE_WINDOW = ReferenceWindow()


def decode_audio(data: bytes, max_s: float = MAX_FILE_S) -> tuple[np.ndarray, int]:
    """Bytes of an audio file -> (samples, 1) float32 (its channels mixed down as they are read)
    and its rate.

    Bounded before it is decoded: a header that says more than `max_s` seconds is refused from
    the header, and a decode (libsndfile's or ffmpeg's) never yields more than `max_s` seconds, so a
    small compressed file holding an hour costs milliseconds and no memory. libsndfile reads WAV,
    FLAC, OGG/Vorbis/Opus, MP3, AIFF and more; anything else goes through an `ffmpeg` on PATH when
    there is one (m4a, webm from a browser's recorder).
    """
    if not data:
        raise ReferenceAudioError("the reference audio is empty (0 bytes)")
    if len(data) > MAX_FILE_BYTES:
        raise ReferenceAudioError(f"the reference file is {len(data) / 2**20:.1f} MB; at most {MAX_FILE_BYTES // 2**20} MB")
    try:
        info = sf.info(io.BytesIO(data))
    except (sf.LibsndfileError, RuntimeError, TypeError, ValueError) as first:
        return _decode_with_ffmpeg(data, max_s, first)
    if not 0 < info.samplerate <= MAX_RATE:
        raise ReferenceAudioError(f"the reference's sample rate is {info.samplerate} Hz; at most {MAX_RATE} Hz")
    if 0 < info.frames and info.frames / info.samplerate > max_s:
        raise _too_long(info.frames / info.samplerate, max_s)
    limit = int(max_s * info.samplerate)
    parts, n = [], 0
    try:  # a header that reads and samples that do not (a cut-off FLAC) are bad audio too, not a fault
        with sf.SoundFile(io.BytesIO(data)) as f:
            for block in f.blocks(blocksize=1 << 16, dtype="float32", always_2d=True, frames=limit + 1):
                parts.append(block.mean(axis=1, dtype=np.float32) if block.shape[1] > 1 else block[:, 0].copy())
                n += len(block)
    except (sf.LibsndfileError, RuntimeError) as exc:
        raise ReferenceAudioError(f"the reference is not readable audio ({_reason(exc)}); use WAV, FLAC, OGG "
                                  "or MP3") from None
    if n > limit:  # the header under-counted
        raise _too_long(n / info.samplerate, max_s, at_least=True)
    mono = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return mono[:, None], int(info.samplerate)


def _too_long(seconds: float, max_s: float, at_least: bool = False) -> ReferenceAudioError:
    return ReferenceAudioError(f"the reference file holds {'over ' if at_least else ''}{seconds:.0f} s of audio; at most "
                               f"{max_s:g} s, of which {REFERENCE_WINDOW.describe()} make the voice: trim it")


def _decode_with_ffmpeg(data: bytes, max_s: float, first: Exception) -> tuple[np.ndarray, int]:
    """What libsndfile cannot read, through ffmpeg: mono, and never more than max_s seconds out."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise ReferenceAudioError(f"the reference is not readable audio ({_reason(first)}); use WAV, FLAC, OGG or MP3")
    proc = subprocess.run(
        [ffmpeg, "-v", "error", "-i", "pipe:0", "-t", f"{max_s + 1:g}", "-ac", "1", "-f", "wav",
         "-acodec", "pcm_f32le", "pipe:1"],
        input=data, capture_output=True, timeout=60,
    )
    if proc.returncode != 0 or not proc.stdout:
        raise ReferenceAudioError(f"the reference is not readable audio: {proc.stderr.decode(errors='replace').strip()[:200]}")
    audio, rate = sf.read(io.BytesIO(proc.stdout), dtype="float32", always_2d=True)
    if len(audio) > max_s * rate:
        raise _too_long(len(audio) / rate, max_s, at_least=True)
    return audio, int(rate)


def _reason(exc: Exception) -> str:
    """libsndfile's reason without the stream's repr ("Error opening <_io.BytesIO object at 0x..>: ")."""
    text = str(exc)
    return text.split(": ", 1)[1] if text.startswith("Error opening <") and ": " in text else text


def as_float(audio: np.ndarray) -> np.ndarray:
    """Samples of any numeric dtype as float32; PCM integers (as a browser recording arrives in
    Gradio) scaled to [-1, 1)."""
    a = np.asarray(audio)
    if a.dtype.kind in "iu":
        a = a.astype(np.float32) / float(np.iinfo(a.dtype).max + 1)
    return a.astype(np.float32, copy=False)


def to_mono(audio: np.ndarray, rate: int, target_rate: int = SAMPLE_RATE) -> np.ndarray:
    """(samples[, channels]) any numeric dtype -> mono float32 at target_rate (soxr, very high quality)."""
    a = as_float(audio)
    if a.ndim == 2:
        # Gradio gives (samples, channels); a (channels, samples) array has few rows and many columns
        a = a.mean(axis=1) if a.shape[0] >= a.shape[1] else a.mean(axis=0)
    if a.ndim != 1:
        raise ReferenceAudioError(f"reference audio must be (samples,) or (samples, channels), got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ReferenceAudioError("the reference audio holds NaN or infinite samples")
    if rate <= 0:
        raise ReferenceAudioError(f"the reference's sample rate must be positive, got {rate}")
    if rate != target_rate and a.size:
        a = soxr.resample(a, rate, target_rate, quality="VHQ").astype(np.float32)
    return a


def trim_silence(audio: np.ndarray, rate: int) -> np.ndarray:
    """Drop the 20 ms windows quieter than SILENCE_DBFS at both ends; empty when all are."""
    n = max(1, int(rate * _WINDOW_S))
    frames = len(audio) // n
    if frames == 0:
        return audio[:0]
    rms = np.sqrt(np.mean(audio[: frames * n].reshape(frames, n) ** 2, axis=1) + 1e-20)
    loud = np.nonzero(20 * np.log10(rms) > SILENCE_DBFS)[0]
    if loud.size == 0:
        return audio[:0]
    return audio[loud[0] * n : min(len(audio), (loud[-1] + 1) * n)]


def prepare_reference(
    audio: np.ndarray, rate: int, window: ReferenceWindow = REFERENCE_WINDOW, target_rate: int = SAMPLE_RATE
) -> np.ndarray:
    """Any-rate, any-channel samples -> trimmed mono float32 at target_rate inside the window."""
    mono = to_mono(audio, rate, target_rate)
    if mono.size == 0:
        raise ReferenceAudioError("the reference audio has no samples")
    trimmed = trim_silence(mono, target_rate)
    if trimmed.size == 0:
        raise ReferenceAudioError(f"the reference audio is silent (nothing above {SILENCE_DBFS:g} dBFS): record or upload {window.describe()}")
    seconds = trimmed.size / target_rate
    if seconds < window.min_s:
        raise ReferenceAudioError(f"the reference is too short: {seconds:.1f} s of sound, need {window.describe()}")
    if seconds > window.max_s:
        raise ReferenceAudioError(f"the reference is too long: {seconds:.1f} s of sound, use {window.describe()} (trim it)")
    return trimmed


def page_audio(value: PageAudio) -> tuple[np.ndarray, int]:
    """A Gradio Audio value (a file path, or a (rate, samples) tuple from the microphone or an
    upload) -> (float samples, rate), decoded here."""
    if isinstance(value, (str, Path)):
        return decode_audio(read_reference_file(value))
    if isinstance(value, (tuple, list)) and len(value) == 2:
        rate, samples = value
        return as_float(np.asarray(samples)), int(rate)
    raise ReferenceAudioError(f"unexpected reference audio value of type {type(value).__name__}")


def read_reference_file(path: str | Path) -> bytes:
    p = Path(path)
    if not p.is_file():
        raise ReferenceAudioError(f"reference audio file not found: {p}")
    if p.stat().st_size > MAX_FILE_BYTES:
        raise ReferenceAudioError(f"the reference file is {p.stat().st_size / 2**20:.1f} MB; at most {MAX_FILE_BYTES // 2**20} MB")
    return p.read_bytes()


def decode_base64_audio(value: object) -> bytes:
    """vLLM-Omni's `ref_audio` request field: base64 of an audio file, or a data URL
    (`data:audio/wav;base64,...`). Raises ReferenceAudioError for anything else."""
    import base64
    import binascii

    if not isinstance(value, str) or not value.strip():
        raise ReferenceAudioError("must be a non-empty string: base64 audio or a data: URL")
    text = value.strip()
    if text.startswith("data:"):
        head, sep, payload = text.partition(",")
        if not sep or not head.endswith(";base64"):
            raise ReferenceAudioError("a data URL must be base64-encoded (data:audio/...;base64,...)")
        mime = head[5:].split(";")[0]
        if mime and not mime.startswith(("audio/", "application/octet-stream", "video/webm", "video/ogg")):
            raise ReferenceAudioError(f"the data URL's type is {mime!r}, not audio")
        text = payload
    elif text.startswith(("http://", "https://", "file:")):
        raise ReferenceAudioError("URLs are not fetched by this server: send the audio itself (base64 or a data URL)")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ReferenceAudioError(f"is not valid base64 ({e})") from e
