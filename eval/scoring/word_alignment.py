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

A row the text front end read (text_normalization, a lexicon: the model said "five dollars fifty
cents" where the text says "$5.50"): the heard words are read the same way before the aligner
times them, and each is timed over the spoken words it became (gepard_demo/alignment/written.py),
so the normalized "$5.50" Whisper's words turn into spans "five dollars fifty cents" in the audio.
Each op with a reference word then also names the written token it came from (`written`, and
`wi`, the token's place in the text) and, where the front end changed it, what was read for it
(`spoken`): the Eval tab shows the written token over its ops' span (eval/ui/word_view.py).

One op: {"op": "ok" | "sub" | "del" | "ins", "ref": word | None, "hyp": word | None,
         "s": seconds | None, "e": seconds | None[, "written": token, "wi": int, "spoken": words]}.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from gepard_demo.alignment.aligner import Aligner

# How the row's text was read: (text_normalization, lexicon_entries); ("off", ""): as written.
Reading = tuple[str, str]

OPS = ("ok", "sub", "del", "ins")
_JIWER = {"equal": "ok", "substitute": "sub", "delete": "del", "insert": "ins"}


def edit_ops(ref_norm: str, hyp_norm: str) -> list[tuple[str, str | None, str | None, int]]:
    """(op, reference word, heard word, the heard word's index) in order, from jiwer's alignment;
    the heard index is the insertion point for a deletion (the heard word after it)."""
    import jiwer

    ref, hyp = ref_norm.split(), hyp_norm.split()
    if not ref or not hyp:
        return [("del", w, None, 0) for w in ref] + [("ins", None, w, j) for j, w in enumerate(hyp)]
    out: list[tuple[str, str | None, str | None, int]] = []
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
        s: float | None
        e: float | None
        if op == "del":
            before = next((t for k in range(j - 1, -1, -1) if (t := heard[k][1]) is not None), 0.0)
            after = next((t for k in range(j, len(heard)) if (t := heard[k][0]) is not None), audio_s)
            s, e = before, max(before, after)
        else:
            s, e = heard[j]
        out.append({"op": op, "ref": ref, "hyp": hyp, "s": None if s is None else round(s, 2),
                    "e": None if e is None else round(e, 2)})
    return out


def heard_times(aligner: Aligner, audio: np.ndarray, sample_rate: int, hyp_norm: str,
                reading: Reading = ("off", "")) -> tuple[list[tuple[float | None, float | None]], str]:
    """Each heard word's (start, end), from the aligner run on the normalized transcript as the
    row's text was read (reading: its text_normalization and lexicon_entries; each word over the
    spoken words it became); and the aligner's note (no speech, ...). A normalized word is one of
    the aligner's words as the aligner cuts it (gepard_demo.alignment.words); one with nothing to
    time has no time."""
    from gepard_demo.alignment.words import text_words
    from gepard_demo.alignment.written import align_written

    words = hyp_norm.split()
    if not words:
        return [], ""
    alignment = align_written(aligner, audio, sample_rate, hyp_norm, *reading)
    timed = iter(alignment.words)
    out = []
    for w in words:
        mine = [next(timed, None) for _ in text_words(w)]  # the aligner's words of this one (none, or a few)
        ok = [a for a in mine if a is not None and a.timed]
        out.append((ok[0].start, ok[-1].end) if ok and len(ok) == len(mine) else (None, None))
    return out, alignment.note


def word_alignment(aligner: Aligner, audio: np.ndarray, sample_rate: int, ref_norm: str, hyp_norm: str,
                   text: str | None = None, reading: Reading = ("off", "")) -> dict:
    """A scored row's words: {"ops": [...], "note": str}. text, reading: the row's written text and
    how the front end read it; where that changed what was said, ops name their written tokens."""
    read = text is not None and reading != ("off", "")
    heard, note = heard_times(aligner, audio, sample_rate, hyp_norm, reading if read else ("off", ""))
    if len(heard) < len(hyp_norm.split()):
        heard = [(None, None)] * len(hyp_norm.split())
    ops = timed_ops(ref_norm, hyp_norm, heard, len(audio) / sample_rate)
    tokens = written_tokens(text, ref_norm, reading) if read and text is not None else None
    if tokens is not None:
        refs = iter(tokens)
        for o in ops:
            if o["ref"] is not None:
                wi, token, said = next(refs)
                o.update({"written": token, "wi": wi, **({"spoken": said} if said is not None else {})})
    return {"ops": ops, "note": note}


def written_tokens(text: str, ref_norm: str, reading: Reading) -> list[tuple[int, str, str | None]] | None:
    """Per word of ref_norm (the written text normalized): (its written token's place in the text,
    the token, what the front end read for the token's piece where it changed it). None where the
    tokens normalized one by one do not give ref_norm's words (a number written over two tokens):
    the ops then keep their normalized words alone."""
    from eval.scoring.normalize import normalize
    from gepard_demo.text.front_end import shared
    from gepard_demo.text.lexicon import parse_cached

    mode, entries = reading
    out: list[tuple[int, str, str | None]] = []
    words: list[str] = []
    k = 0  # the token's place among the text's whitespace tokens
    for piece in shared().read(text, mode, parse_cached(entries, "lexicon_entries")).pieces:
        for token in piece.written.split():
            mine = normalize(token).split()
            words += mine
            out += [(k, token, piece.spoken if piece.changed else None)] * len(mine)
            k += 1
    return out if words == ref_norm.split() else None


def text_words_of(ops: list[dict]) -> list[str]:
    """The ops' words of the text, for a line that quotes them: each written token once where the
    ops name it (a read row), else the normalized reference word."""
    out: list[str] = []
    last = None
    for o in ops:
        if o["ref"] is None or ("wi" in o and o["wi"] == last):
            continue
        out.append(o.get("written", o["ref"]))
        last = o.get("wi")
    return out


def counts(ops: list[dict]) -> dict[str, int]:
    return {op: sum(o["op"] == op for o in ops) for op in OPS}
