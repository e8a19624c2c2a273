"""Loop detectors: an autoregressive TTS that derails often repeats itself ("...from the store the
store the store"), which WER barely shows (one loop is a few insertions) and no length figure
catches when the loop is short.

From the transcript (normalized, both sides):
- ngram_excess: over word n-grams of 1 to 4 words that the transcript holds at least 3 times,
  the largest count by which it holds one more often than the reference does; with the n-gram.
  A loop when the excess reaches NGRAM_EXCESS (2) for n >= 2 or UNIGRAM_EXCESS (3) for one word
  (a reference's own repetitions do not count, nor an ASR slip of a word or two).
- end_insertions: transcript words after the last reference word matched or substituted
  (metrics.trailing_edits): the model kept talking. A loop from END_INSERTIONS (3) on.

From the codec frames, where an engine keeps them (local engines; `codes/<id>.npy`):
- frame_loop_s: the longest stretch in which every frame matches the frame `lag` steps earlier
  in at least MATCH (28) of its 32 codes, for some lag from 1 (a stuck frame) to MAX_LAG (43
  frames, 2 s: a repeated syllable or word), over stretches of audible audio (RMS above
  SILENT_DBFS: a codec's silence repeats too, and silence has its own failure entries). A loop
  from FRAME_LOOP_S (1.0 s) on, and at least two lags long.
"""

from __future__ import annotations

import math
from collections import Counter

import jiwer
import numpy as np

from eval.scoring.metrics import trailing_edits
from gepard_demo.units import FRAME_RATE_HZ

NGRAM_EXCESS = 2
UNIGRAM_EXCESS = 3
END_INSERTIONS = 3
MATCH = 28
MAX_LAG = 43
FRAME_LOOP_S = 1.0
SILENT_DBFS = -45.0


def _ngrams(words: list[str], n: int) -> Counter:
    return Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))


def ngram_excess(ref_norm: str, hyp_norm: str) -> tuple[int, str, bool]:
    """(excess, n-gram, loop?) for the n-gram furthest past its threshold (module docstring);
    (0, "", False) when nothing in the transcript repeats beyond the reference."""
    ref, hyp = ref_norm.split(), hyp_norm.split()
    best = (0.0, 0, "")  # (excess / threshold, excess, n-gram)
    for n in range(1, 5):
        threshold = UNIGRAM_EXCESS if n == 1 else NGRAM_EXCESS
        ref_counts = _ngrams(ref, n)
        for gram, count in _ngrams(hyp, n).items():
            if count >= 3:
                excess = count - ref_counts.get(gram, 0)
                if excess / threshold > best[0]:
                    best = (excess / threshold, excess, " ".join(gram))
    return best[1], best[2], best[0] >= 1


def end_insertions(ref_norm: str, hyp_norm: str) -> int:
    if not ref_norm.split() or not hyp_norm.split():
        return 0
    return trailing_edits(jiwer.process_words(ref_norm, hyp_norm).alignments[0])[1]


def transcript_loop(ref_norm: str, hyp_norm: str) -> dict:
    excess, gram, repeats = ngram_excess(ref_norm, hyp_norm)
    inserted = end_insertions(ref_norm, hyp_norm)
    return {"ngram_excess": excess, "loop_ngram": gram or None, "end_insertions": inserted,
            "transcript_loop": repeats or inserted >= END_INSERTIONS}


def frame_loop(codes: np.ndarray, audio: np.ndarray, sample_rate: int, samples_per_frame: int = 1024) -> dict:
    """{frame_loop_s, frame_loop_lag, frame_loop} from (T, 32) codes and the audio they made."""
    codes = np.asarray(codes)
    t = len(codes)
    loud = np.ones(t, bool)
    if len(audio):
        for i in range(t):
            chunk = np.asarray(audio[i * samples_per_frame : (i + 1) * samples_per_frame], np.float64)
            rms = math.sqrt(float(np.mean(chunk * chunk))) if chunk.size else 0.0
            loud[i] = rms > 0 and 20 * math.log10(rms) > SILENT_DBFS
    best, best_lag = 0, None
    for lag in range(1, min(MAX_LAG, t - 1) + 1):
        same = ((codes[lag:] == codes[:-lag]).sum(1) >= MATCH) & loud[lag:] & loud[:-lag]
        run = longest = 0
        for hit in same:
            run = run + 1 if hit else 0
            longest = max(longest, run)
        stretch = longest + lag  # the repeated frames and the ones they repeat
        if longest >= lag and stretch > best:
            best, best_lag = stretch, lag
    seconds = best / FRAME_RATE_HZ
    return {"frame_loop_s": seconds, "frame_loop_lag": best_lag, "frame_loop": seconds >= FRAME_LOOP_S}
