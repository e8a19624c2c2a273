"""How well the speaker-similarity instrument tells voices apart on real speech, and what it costs.

The instrument is eval's and the page's (gepard_demo/voice/similarity.py): Resemblyzer's GE2E speaker encoder,
the cosine of two embeddings. It is NOT the authors' WavLM-SV (seed-tts-eval's SIM), which has no
offline weights here: its figures are comparable across our runs only.

Voices (real speech, each deterministic): Piper's en_US-joe-medium (noise off, as eval's piper
engine) and espeak-ng's en-us with six of its variants (m1, m3, m7, f1, f2, f4: one formant
synthesizer, each variant its own pitch, formants and breath: a hard test, since they share a
synthesizer's sound). Each voice speaks --sentences sentences of the core set.

Two views, each an equal-error rate (EER: where false accepts meet false rejects on the ROC,
similarity.equal_error_rate):
- utterance pairs: every pair of utterances, a target trial when both are one voice;
- as eval uses it: each voice's reference clip (its first sentences joined, 3-15 s, as a saved
  voice's clip is) against every other utterance: a target trial when it is that voice's.
Cost: process CPU seconds per audio second of one embedding (preprocess + GE2E), median over the
utterances, after a warm call; --threads torch threads.

Run: .venv/bin/python benchmarks/speaker_eer.py [--sentences 8] [--threads 2] [--quick]
Measure on a quiet machine. Needs espeak-ng (.ci/apt-packages.txt).
--quick: three voices, three sentences each: proves the path, its figures mean nothing.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from quick import add_quick  # noqa: E402

ESPEAK_VARIANTS = ("m1", "m3", "m7", "f1", "f2", "f4")
RATE = 22050


def espeak(text: str, variant: str, folder: Path) -> np.ndarray:
    """espeak-ng's en-us in a variant, at 22.05 kHz (its own rate)."""
    if shutil.which("espeak-ng") is None:
        raise SystemExit("espeak-ng is not installed: apt-get install espeak-ng (.ci/apt-packages.txt lists it)")
    path = folder / f"{variant}.wav"
    subprocess.run(["espeak-ng", "-v", f"en-us+{variant}", "-w", str(path), text], check=True, capture_output=True)
    audio, rate = sf.read(path, dtype="float32")
    assert rate == RATE, rate
    return audio


def voices_speak(sentences: list[str], variants: tuple[str, ...]) -> dict[str, list[np.ndarray]]:
    """{voice: one float32 array per sentence at 22.05 kHz}."""
    from eval.engines.piper import PiperReference
    from eval.engines.request import SynthesisItem
    from gepard_demo.settings import StreamSettings

    piper = PiperReference.load()
    plain = StreamSettings(fade_ms=0.0, silence_ms=0.0)
    spoken = {"piper-joe": [s.audio for s in piper.synthesize([SynthesisItem(t, 0) for t in sentences], None, plain)]}
    assert piper.voice.config.sample_rate == RATE
    with tempfile.TemporaryDirectory() as tmp:
        for v in variants:
            spoken[f"espeak-{v}"] = [espeak(t, v, Path(tmp)) for t in sentences]
    return spoken


def reference_clip(parts: list[np.ndarray], min_s: float = 4.0) -> tuple[np.ndarray, int]:
    """A voice's reference: its first sentences joined until min_s (a saved voice's 3-15 s clip);
    (clip, how many sentences it used)."""
    used, clip = 0, np.zeros(0, np.float32)
    while used < len(parts) - 1 and len(clip) < min_s * RATE:
        clip, used = np.concatenate([clip, parts[used]]), used + 1
    return clip, used


def measure(spoken: dict[str, list[np.ndarray]]) -> dict:
    from gepard_demo.voice.similarity import SpeakerSimilarity, equal_error_rate

    sim = SpeakerSimilarity()
    first = next(iter(spoken.values()))[0]
    sim.embed(first, RATE)  # warm
    emb, costs = {}, []
    for voice, parts in spoken.items():
        for i, audio in enumerate(parts):
            t = time.process_time()
            emb[voice, i] = sim.embed(audio, RATE)
            costs.append((time.process_time() - t) / (len(audio) / RATE))
    cos = lambda a, b: float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))  # noqa: E731
    pairs = {True: [], False: []}
    for (ka, a), (kb, b) in itertools.combinations(emb.items(), 2):
        pairs[ka[0] == kb[0]].append(cos(a, b))
    eer_pairs, thr_pairs = equal_error_rate(np.array(pairs[True]), np.array(pairs[False]))
    refs = {v: reference_clip(parts) for v, parts in spoken.items()}
    ref_emb = {v: sim.embed(clip, RATE) for v, (clip, _) in refs.items()}
    trials = {True: [], False: []}
    for v, r in ref_emb.items():
        for (u, i), e in emb.items():
            if u == v and i < refs[v][1]:
                continue  # a sentence inside the reference clip is no trial
            trials[u == v].append(cos(r, e))
    eer_refs, thr_refs = equal_error_rate(np.array(trials[True]), np.array(trials[False]))
    audio_s = sum(len(a) for parts in spoken.values() for a in parts) / RATE
    return {
        "instrument": "Resemblyzer GE2E (gepard_demo/voice/similarity.py), not the authors' WavLM-SV",
        "voices": list(spoken), "utterances": len(emb), "audio_s": round(audio_s, 1),
        "pairs": {"eer": round(eer_pairs, 4), "threshold": round(thr_pairs, 3), "target_trials": len(pairs[True]),
                  "nontarget_trials": len(pairs[False]), "target_mean": round(float(np.mean(pairs[True])), 3),
                  "nontarget_mean": round(float(np.mean(pairs[False])), 3)},
        "reference_clip": {"eer": round(eer_refs, 4), "threshold": round(thr_refs, 3),
                           "target_trials": len(trials[True]), "nontarget_trials": len(trials[False]),
                           "target_mean": round(float(np.mean(trials[True])), 3),
                           "nontarget_mean": round(float(np.mean(trials[False])), 3)},
        "cpu_s_per_audio_s": {"median": round(float(np.median(costs)), 4), "max": round(float(np.max(costs)), 4)},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    add_quick(ap)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from eval.runs.sets import load_set

    n = 3 if args.quick else args.sentences
    sentences = [u.text for u in load_set("core") if 6 <= len(u.text.split()) <= 16][:n]
    spoken = voices_speak(sentences, ESPEAK_VARIANTS[:2] if args.quick else ESPEAK_VARIANTS)
    result = measure(spoken)
    print(json.dumps({"sentences": len(sentences), "threads": args.threads, **result}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
