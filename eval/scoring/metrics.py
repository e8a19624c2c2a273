"""Per-utterance error counts and length / stop-head figures.

Definitions (every number in summary.json and the report is built from these):

- Words: the normalized reference's words (eval.scoring.normalize). N_ref = their count.
- S, D, I: substitutions, deletions, insertions of the minimum-edit word alignment (jiwer).
- Per-utterance WER = (S + D + I) / N_ref (can exceed 1 through insertions).
- CER = character edits / reference characters, on the normalized strings, spaces included.
- exact: the normalized hypothesis equals the normalized reference.
- catastrophic: per-utterance WER > 0.5 (speecheval).
- end_deletions: reference words deleted at the very end of the alignment (nothing of the
  hypothesis matched after them): the end of the text was not spoken, or not heard.
- expected_s = 0.7 + 0.4 * words(input text) seconds (Gepard's own scorer).
- duration_ratio = duration_s / expected_s; truncation: ratio < 0.5; overlong: ratio > 2.0.
- runaway: the frame budget was hit before the stop head fired (reported by the engine).
- frames_per_word = frames / words(input text).
- premature_stop: the stop head fired and (duration_ratio < 0.5 or end_deletions > 0).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import jiwer

from gepard_demo.units import expected_speech_s

TRUNCATION_RATIO = 0.5
OVERLONG_RATIO = 2.0
CATASTROPHIC_WER = 0.5


@dataclass(frozen=True)
class WordErrors:
    n_ref: int
    hits: int
    sub: int
    dele: int
    ins: int
    end_deletions: int
    char_edits: int
    n_ref_chars: int

    @property
    def errors(self) -> int:
        return self.sub + self.dele + self.ins

    @property
    def wer(self) -> float:
        """Per-utterance WER; an empty reference scores 0 if the hypothesis is empty too, else 1."""
        if self.n_ref == 0:
            return 0.0 if self.ins == 0 else 1.0
        return self.errors / self.n_ref

    @property
    def cer(self) -> float:
        if self.n_ref_chars == 0:
            return 0.0 if self.char_edits == 0 else 1.0
        return self.char_edits / self.n_ref_chars

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(errors=self.errors, wer=self.wer, cer=self.cer)
        return d


def trailing_edits(alignment) -> tuple[int, int]:
    """(reference words deleted, hypothesis words inserted) after the last reference word that
    was matched or substituted, from one jiwer alignment (its chunks in order)."""
    deleted = inserted = 0
    for ch in reversed(alignment):
        if ch.type == "delete":
            deleted += ch.ref_end_idx - ch.ref_start_idx
        elif ch.type == "insert":
            inserted += ch.hyp_end_idx - ch.hyp_start_idx
        else:
            break
    return deleted, inserted


def word_errors(ref_norm: str, hyp_norm: str) -> WordErrors:
    """Align two already-normalized strings (see eval.scoring.normalize)."""
    ref_words, hyp_words = ref_norm.split(), hyp_norm.split()
    if not ref_words:
        return WordErrors(0, 0, 0, 0, len(hyp_words), 0, len(hyp_norm), 0)
    if not hyp_words:
        return WordErrors(len(ref_words), 0, 0, len(ref_words), 0, len(ref_words), len(ref_norm), len(ref_norm))
    w = jiwer.process_words(ref_norm, hyp_norm)
    end_del, _ = trailing_edits(w.alignments[0])
    c = jiwer.process_characters(ref_norm, hyp_norm)
    char_edits = c.substitutions + c.deletions + c.insertions
    return WordErrors(len(ref_words), w.hits, w.substitutions, w.deletions, w.insertions, end_del, char_edits, len(ref_norm))


def length_figures(words: int, frames: int, duration_s: float, stop_fired: bool, end_deletions: int | None) -> dict:
    """Length and stop-head figures of one utterance (definitions in the module docstring).

    end_deletions is None before ASR scoring; premature_stop then uses the ratio alone.
    """
    expected = expected_speech_s(words)
    ratio = duration_s / expected
    premature = bool(stop_fired) and (ratio < TRUNCATION_RATIO or bool(end_deletions))
    return {
        "expected_s": expected,
        "duration_ratio": ratio,
        "truncated": ratio < TRUNCATION_RATIO,
        "overlong": ratio > OVERLONG_RATIO,
        "frames_per_word": frames / max(words, 1),
        "premature_stop": premature,
    }
