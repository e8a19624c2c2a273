"""From the DTW's spans to words with edges, confidences and states.

The DTW path hands every frame to some word, so a silence goes to a word beside it (the measured
edge then misses by up to 0.3 s), and inside connected speech its edges run late. Five steps
place the edges, using the speech (speech.speech_seconds: pauses of 100 ms or more), the level and
the hiss (speech.levels, speech.hiss):
1. snap: where two words meet within SNAP_S of a pause, the first ends where the pause starts and
   the second begins where it ends (never shrinking a word below one DTW frame);
2. dip: a meeting point left inside speech moves to the quietest 10 ms within DIP_S of it when
   that is at least DIP_DB below the loudest on either side of it (a word's edge in connected
   speech is often a dip: a stop's closure, the release between two syllables);
3. hiss: a meeting point after a word that ends in a sibilant (words.ends_hissing) moves to the end
   of the noise it lies in, or that starts within HISS_REACH_S after it: Whisper base ends such a
   word early and gives its "s" to the next word (median 187 ms early at 19 joins; tiny.en 12 ms),
   and the noise's end is plain in the hiss (alignment_fixtures.HISSING_PAIRS: the readings'
   median 79 ms early without this step, 2 ms with it);
4. the last word ends where its speech ends: the DTW's last row (the end of text) can take that
   word's last frames even with silence after it (measured: 36-95 ms early, two of 12 sentences);
5. trim: each word starts and ends in speech (its leading or trailing silence is cut off).
The first word needs no such step: the DTW starts at the window's first frame, so trim gives it
the speech's own start.

Then each word's confidence (DESIGN, "When each word is spoken"): s x q, where
- s: the share of its span that is speech;
- q: min(1, L / d, d / S) for its span of d seconds, L = STRETCH x pace x letters + SLACK_S the
  longest and S = SHORT x pace x letters the shortest a word of its length lasts at this
  utterance's pace (the median seconds per letter of its words): a word whose span also holds a
  repeat, or any sound that is not it, is longer than L; a sliver the path handed a lost word is
  shorter than S.
Whisper's probability of the word (p) is kept beside the confidence, not in it: it says how
expected a word is, not whether it was said.
A word is "unaligned" when the path gave it no frame and Whisper does not hear it there (p under
HEARD), or no speech lies under it; "low" when it had no frame but Whisper hears it (squeezed), or
its confidence is under the settings' threshold; else "aligned".
"""

from __future__ import annotations

import numpy as np

from .result import AlignedWord
from .speech import ASR_RATE, LEVEL_WINDOW
from .whisper_align import FRAME_S
from .words import TextWord, ends_hissing, spoken_letters

SNAP_S = 0.25  # a meeting point this close to a pause moves into it
# Inside connected speech no pause marks a word's edge; the DTW's misses there are mostly late
# (median +44 ms over 131 joins of two halves spoken apart and joined with no gap). A meeting point
# with a dip in the level this close moves into it. Measured in benchmarks/alignment_cost.py; a
# wider reach (0.12, 0.16 s) or a deeper dip (15 dB) measured worse.
DIP_S = 0.08
DIP_DB = 6.0
HISS_DB = -10.0  # a 10 ms window with more hiss than this is a sibilant's noise (speech.hiss)
HISS_REACH_S = 0.12  # the noise may start this far after the meeting point (Piper: up to 0.1 s)
HISS_MOST_S = 0.3  # a point never moves further: past it the noise is another word's
STRETCH = 1.5  # with SLACK_S and LOW_CONFIDENCE: calibrated on Piper speech, see alignment/settings.py
SLACK_S = 0.15  # short words vary most (a final "a" held, a pause the VAD does not split)
SHORT = 0.33  # a span under a third of its letters' time at this pace is too short to hold the word
HEARD = 0.5  # Whisper's probability above which a word with no frame is squeezed, not lost


def has_frame(span: tuple[float, float, float]) -> bool:
    """Whether the DTW gave a (start, end, probability) span a frame of its own."""
    return span[1] - span[0] >= FRAME_S / 2


def _overlap(a: float, b: float, spans: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, e) - max(a, s)) for s, e in spans)


def _speech_at(t: float, spans: list[tuple[float, float]]) -> bool:
    return any(s <= t <= e for s, e in spans)


def _distance(b: float, gap: tuple[float, float]) -> float:
    return 0.0 if gap[0] <= b <= gap[1] else min(abs(b - gap[0]), abs(b - gap[1]))


def _snap(edges: list[list[float]], present: list[bool], speech: list[tuple[float, float]]) -> None:
    """Step 1, in place: a meeting point of two words with frames moves into a pause within SNAP_S,
    each pause going to the meeting point nearest it (so a word ending just before a pause does
    not lose the pause to the meeting point before it)."""
    gaps = [(a[1], b[0]) for a, b in zip(speech, speech[1:])]
    meets = [k for k in range(len(edges) - 1) if present[k] and present[k + 1]]
    claims: dict[int, tuple[float, int]] = {}  # gap -> (distance, meeting point) of its nearest
    for k in meets:
        for g, gap in enumerate(gaps):
            d = _distance(edges[k][1], gap)
            if d <= SNAP_S and (g not in claims or d < claims[g][0]):
                claims[g] = (d, k)
    best: dict[int, tuple[float, int]] = {}  # meeting point -> (distance, gap) of its nearest claimed pause
    for g, (d, k) in claims.items():
        if k not in best or d < best[k][0]:
            best[k] = (d, g)
    for k, (_, g) in best.items():
        g0, g1 = gaps[g]
        if g0 - edges[k][0] >= FRAME_S and edges[k + 1][1] - g1 >= FRAME_S:
            edges[k][1], edges[k + 1][0] = g0, g1


def _dip(edges: list[list[float]], present: list[bool], level: np.ndarray) -> None:
    """Step 2, in place: a meeting point left inside speech (no pause near it) moves to the
    quietest 10 ms within DIP_S of it when that is a dip DIP_DB below the loudest on each side."""
    n, window_s = len(level), LEVEL_WINDOW / ASR_RATE
    for k in range(len(edges) - 1):
        if not (present[k] and present[k + 1]) or edges[k][1] != edges[k + 1][0]:
            continue  # no frames, or already split by a pause
        t = edges[k][1]
        lo, hi = max(0, int((t - DIP_S) / window_s)), min(n, int((t + DIP_S) / window_s) + 1)
        if hi - lo < 3:
            continue
        m = lo + int(np.argmin(level[lo:hi]))
        if level[m] > min(level[lo: m + 1].max(), level[m:hi].max()) - DIP_DB:
            continue
        at = (m + 0.5) * window_s
        if edges[k][0] + FRAME_S <= at <= edges[k + 1][1] - FRAME_S:
            edges[k][1] = edges[k + 1][0] = at


def _hiss(edges: list[list[float]], present: list[bool], words: list[TextWord], hiss: np.ndarray,
          speech: list[tuple[float, float]]) -> None:
    """Step 3, in place: a meeting point inside speech after a word that ends in a sibilant moves
    forward to the end of the noise (windows above HISS_DB, inside speech) it lies in or that starts
    within HISS_REACH_S after it; never back (a late point stays: the noise gives no sign of it)."""
    window_s = LEVEL_WINDOW / ASR_RATE
    noisy = lambda i: hiss[i] > HISS_DB and _speech_at((i + 0.5) * window_s, speech)  # noqa: E731
    for k in range(len(edges) - 1):
        if not (present[k] and present[k + 1]) or edges[k][1] != edges[k + 1][0] or not ends_hissing(words[k].word):
            continue
        t = edges[k][1]
        i, reach = int(t / window_s), int((t + HISS_REACH_S) / window_s)
        while i < min(reach, len(hiss)) and not noisy(i):
            i += 1
        if i >= len(hiss) or not noisy(i):
            continue
        while i < len(hiss) and noisy(i):
            i += 1
        at = i * window_s
        if at - t <= HISS_MOST_S and at <= edges[k + 1][1] - FRAME_S:
            edges[k][1] = edges[k + 1][0] = at


def _reach_end(edges: list[list[float]], present: list[bool], speech: list[tuple[float, float]]) -> None:
    """Step 4, in place: the last word with frames ends where the speech its end lies in ends."""
    have = [k for k, p in enumerate(present) if p]
    if not have:
        return
    last = edges[have[-1]]
    for s, e in speech:
        if s <= last[1] <= e:
            last[1] = max(last[1], e)
            return


def _trim(a: float, b: float, speech: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Step 5: the span cut to the speech inside it; None when there is none."""
    inside = [(max(a, s), min(b, e)) for s, e in speech if min(b, e) > max(a, s)]
    if not inside:
        return None
    return inside[0][0], inside[-1][1]


def refine(words: list[TextWord], raw: list[tuple[float, float, float]], speech: list[tuple[float, float]],
           low_confidence: float, level: np.ndarray, hiss: np.ndarray) -> list[AlignedWord]:
    """raw: per word (start, end, probability) from the DTW, seconds into the audio; speech: the
    VAD's (start, end) seconds; level, hiss: the audio's speech.levels and speech.hiss (dB per
    10 ms), for the dip and hiss steps."""
    edges = [[s, e] for s, e, _ in raw]
    present = [has_frame(span) for span in raw]
    # A word the path gave no frame is lost when Whisper does not hear it there either; one it
    # does hear (a short word squeezed between two others, ~0.5% of clean words) keeps its point.
    squeezed = [not has and p >= HEARD for has, (_, _, p) in zip(present, raw)]
    _snap(edges, present, speech)
    _dip(edges, present, level)
    _hiss(edges, present, words, hiss, speech)
    _reach_end(edges, present, speech)
    spans: list[tuple[float, float] | None] = []
    for (a, b), has in zip(edges, present):
        spans.append(_trim(a, b, speech) if has else None)
    rates = sorted((sp[1] - sp[0]) / spoken_letters(w.word) for w, sp in zip(words, spans) if sp and sp[1] > sp[0])
    pace = rates[len(rates) // 2] if rates else 0.07
    out = []
    for k, (w, (_, _, p), has, sp, squeezed_here) in enumerate(zip(words, raw, present, spans, squeezed)):
        if squeezed_here:
            t = round(edges[k][0], 3)
            out.append(AlignedWord(w.word, w.written, t, t, 0.0, p, "low",
                                   "too short for the aligner to time (Whisper hears it about here)"))
            continue
        if not has:
            out.append(AlignedWord(w.word, w.written, None, None, 0.0, p, "unaligned",
                                   "the audio has no place for it (lost, or cut off)"))
            continue
        if sp is None:
            out.append(AlignedWord(w.word, w.written, None, None, 0.0, p, "unaligned", "no speech under it"))
            continue
        a, b = sp
        d = b - a
        s = _overlap(a, b, speech) / d if d > 0 else float(_speech_at(a, speech))
        longest = STRETCH * pace * spoken_letters(w.word) + SLACK_S
        shortest = SHORT * pace * spoken_letters(w.word)
        q = min(1.0, longest / d, d / shortest) if d > 0 else 1.0
        conf = max(0.0, min(1.0, s * q))
        why, state = "", "aligned"
        if conf < low_confidence:
            state = "low"
            why = (f"only {s:.0%} of its span is speech" if s < low_confidence
                   else f"{d:.2f} s, longer than it takes at this pace: something else is in its span" if d > longest
                   else f"{d:.2f} s, too short to hold it at this pace")
        out.append(AlignedWord(w.word, w.written, round(float(a), 3), round(float(b), 3), float(conf), float(p), state, why))
    return out
