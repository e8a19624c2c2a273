"""Every error placed in time: the reference words against what was heard, each op with its seconds.

The WER's own alignment (jiwer's minimum-edit alignment of the normalized reference and
transcript, the one eval.scoring.metrics counts S, D and I from) says which words were matched,
substituted, deleted or inserted. The aligner (gepard_demo.alignment: the page's and the server's)
then times the words that were *heard* (the normalized transcript) in the audio, so:
- a match, a substitution and an insertion take the time of the heard word;
- a deletion was not heard, so it sits in the gap where it should have been: from the end of the
  heard word before it to the start of the heard word after it (to the audio's end when nothing
  follows: the words a truncation lost).
Heard words the aligner could not place (unaligned) leave their ops without a time.

One op: {"op": "ok" | "sub" | "del" | "ins", "ref": word | None, "hyp": word | None,
         "s": seconds | None, "e": seconds | None}.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from gepard_demo.alignment.aligner import Aligner

OPS = ("ok", "sub", "del", "ins")
_JIWER = {"equal": "ok", "substitute": "sub", "delete": "del", "insert": "ins"}


def edit_ops(ref_norm: str, hyp_norm: str) -> list[tuple[str, str | None, str | None, int | None]]:
    """(op, reference word, heard word, the heard word's index) in order, from jiwer's alignment;
    the heard index is the insertion point for a deletion (the heard word after it)."""
    import jiwer

    ref, hyp = ref_norm.split(), hyp_norm.split()
    if not ref or not hyp:
        return [("del", w, None, 0) for w in ref] + [("ins", None, w, j) for j, w in enumerate(hyp)]
    out: list[tuple[str, str | None, str | None, int | None]] = []
    for ch in jiwer.process_words(ref_norm, hyp_norm).alignments[0]:
        op = _JIWER[ch.type]
        if op in ("ok", "sub"):
            out += [(op, ref[ch.ref_start_idx + k], hyp[ch.hyp_start_idx + k], ch.hyp_start_idx + k)
                    for k in range(ch.ref_end_idx - ch.ref_start_idx)]
        elif op == "del":
            out += [(op, ref[i], None, ch.hyp_start_idx) for i in range(ch.ref_start_idx, ch.ref_end_idx)]
        else:
            out += [(op, None, hyp[j], j) for j in range(ch.hyp_start_idx, ch.hyp_end_idx)]
    return out


def timed_ops(ref_norm: str, hyp_norm: str, heard: list[tuple[float | None, float | None]], audio_s: float) -> list[dict]:
    """The ops with times. heard: per word of hyp_norm, its (start, end) in the audio (None: not
    placed)."""
    out = []
    for op, ref, hyp, j in edit_ops(ref_norm, hyp_norm):
        if op == "del":
            before = next((heard[k][1] for k in range(j - 1, -1, -1) if heard[k][1] is not None), 0.0)
            after = next((heard[k][0] for k in range(j, len(heard)) if heard[k][0] is not None), audio_s)
            s, e = before, max(before, after)
        else:
            s, e = heard[j]
        out.append({"op": op, "ref": ref, "hyp": hyp, "s": None if s is None else round(s, 2),
                    "e": None if e is None else round(e, 2)})
    return out


def heard_times(aligner: Aligner, audio: np.ndarray, sample_rate: int,
                hyp_norm: str) -> tuple[list[tuple[float | None, float | None]], str]:
    """Each heard word's (start, end), from the aligner run on the normalized transcript; and the
    aligner's note (no speech, ...). A normalized word is one of the aligner's words as the aligner
    cuts it (gepard_demo.alignment.words); one with nothing to time has no time."""
    from gepard_demo.alignment.words import text_words

    words = hyp_norm.split()
    if not words:
        return [], ""
    alignment = aligner.align(audio, sample_rate, hyp_norm)
    timed = iter(alignment.words)
    out = []
    for w in words:
        mine = [next(timed, None) for _ in text_words(w)]  # the aligner's words of this one (none, or a few)
        ok = [a for a in mine if a is not None and a.timed]
        out.append((ok[0].start, ok[-1].end) if ok and len(ok) == len(mine) else (None, None))
    return out, alignment.note


def word_alignment(aligner: Aligner, audio: np.ndarray, sample_rate: int, ref_norm: str, hyp_norm: str) -> dict:
    """A scored row's words: {"ops": [...], "note": str}."""
    heard, note = heard_times(aligner, audio, sample_rate, hyp_norm)
    if len(heard) < len(hyp_norm.split()):
        heard = [(None, None)] * len(hyp_norm.split())
    return {"ops": timed_ops(ref_norm, hyp_norm, heard, len(audio) / sample_rate), "note": note}


def counts(ops: list[dict]) -> dict[str, int]:
    return {op: sum(o["op"] == op for o in ops) for op in OPS}
