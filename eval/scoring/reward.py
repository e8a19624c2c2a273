"""The authors' programmatic reward and "clean" rollout (gepard-train gepard/data/dpo/score.py with
conf/dpo/reward/default.yaml and conf/dpo/pairs/default.yaml; facts §15), per utterance.

    R = -1.0 x WER - 0.5 x max(0, dur - dur_max) - 2.0 x [dur < dur_min] - 2.0 x [empty ASR] - 0.5 x (1 - SIM)

- WER (and CER): jiwer on the text and the transcript, both through Whisper's
  BasicTextNormalizer (transformers' english_normalizer, the one score.py imports: lowercase,
  bracketed words dropped, symbols to spaces; no number or spelling rules, so this WER is not the
  headline's, which uses the EnglishTextNormalizer). Empty ASR = the normalised transcript is the
  empty string (score.py's `not hyp`); it counts WER 1.0 and CER 1.0. A punctuation-only
  transcript normalises to a space: not empty, and jiwer gives it WER 1.0, as in score.py.
- dur_min, dur_max = 0.3 x and 2.0 x the expected seconds 0.7 + 0.4 x max(1, words), words = the
  text split on whitespace.
- dur = the speech's seconds. The authors' rollouts are bare codec frames (duration_sec =
  frames / frame rate, no end silence), so: frames x 1024 / 22050 where the row has frames (every
  Gepard engine), else the audio's length minus the run's end silence (silence_ms; Piper, files).
- SIM: the authors use WavLM-SV, not available offline here; the row's `speaker_sim` (Resemblyzer
  GE2E cosine, gepard_demo/voice/similarity.py) stands in, only on rows with a reference voice.
  Without one the term is 0, as score.py's "undefined (null prefix / no ref) -> 0". GE2E cosines
  run higher than WavLM-SV's for the same pair, so a cloned row's reward is not the authors' number.
- clean = WER <= 0.2 (pairs' chosen_max_wer) and dur_min <= dur <= dur_max and not truncated and
  not empty. score.py's "truncated" is a rollout that hit its frame cap: here a runaway (the budget
  or the force stop). A row that cannot say (no frames: Piper, files) is taken as not truncated.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import jiwer

from gepard_demo.units import EXPECTED_BASE_S, EXPECTED_PER_WORD_S, FRAME_S, word_count


@dataclass(frozen=True)
class RewardWeights:
    """conf/dpo/reward/default.yaml's weights and bounds, pairs/default.yaml's chosen_max_wer."""

    w_wer: float = 1.0
    w_over: float = 0.5
    w_short: float = 2.0
    w_empty: float = 2.0
    w_sim: float = 0.5
    dur_min_ratio: float = 0.3
    dur_max_ratio: float = 2.0
    sec_base: float = EXPECTED_BASE_S
    sec_per_word: float = EXPECTED_PER_WORD_S
    clean_max_wer: float = 0.2

    def as_dict(self) -> dict:
        return asdict(self)


AUTHORS = RewardWeights()


@functools.lru_cache(maxsize=1)
def _basic():
    from transformers.models.whisper.english_normalizer import BasicTextNormalizer

    return BasicTextNormalizer()


def basic_normalize(text: str) -> str:
    return _basic()(text)


def speech_seconds(frames, duration_s: float, silence_ms: float = 0.0) -> float:
    """dur: frames x 1024 / 22050 when frames are known, else the audio minus the end silence."""
    if frames is not None and frames == frames:
        return float(frames) * FRAME_S
    return max(0.0, float(duration_s) - float(silence_ms or 0.0) / 1000)


def reward(text: str, hyp: str, dur: float, truncated: bool | None, sim: float | None = None,
           w: RewardWeights = AUTHORS) -> dict:
    """One utterance's reward and its parts (the module docstring defines each)."""
    ref_n, hyp_n = basic_normalize(text), basic_normalize(hyp)
    empty = not hyp_n
    if not ref_n.split():  # a text with no word after normalising (score.py would fail on it): any word is wrong
        wer = cer = 0.0 if not hyp_n.split() else 1.0
    else:
        wer = 1.0 if empty else float(jiwer.wer(ref_n, hyp_n))
        cer = 1.0 if empty else float(jiwer.cer(ref_n, hyp_n))
    expected = w.sec_base + w.sec_per_word * max(1, word_count(text))
    dur_min, dur_max = expected * w.dur_min_ratio, expected * w.dur_max_ratio
    sim_cost = w.w_sim * (1.0 - float(sim)) if sim is not None and sim == sim else 0.0  # NaN: not measured
    r = (-w.w_wer * wer - w.w_over * max(0.0, dur - dur_max) - w.w_short * (1.0 if dur < dur_min else 0.0)
         - w.w_empty * (1.0 if empty else 0.0) - sim_cost)
    clean = wer <= w.clean_max_wer and dur_min <= dur <= dur_max and not bool(truncated) and not empty
    return {"reward": r, "clean": bool(clean), "reward_wer": wer, "reward_cer": cer, "empty_asr": empty,
            "reward_dur_s": dur, "dur_min": dur_min, "dur_max": dur_max}
