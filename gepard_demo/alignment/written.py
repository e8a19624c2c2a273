"""The written token over the span of the spoken words it became (issue 65).

With text_normalization or a lexicon on, the model says "five dollars fifty cents" where the text
says "$5.50". The aligner is given what was said (the text front end's reading), and each written
token is then timed over its piece's spoken words (`text/pieces.py`: each run of written tokens
beside the words it became): from the first one's start to the last one's end, no surer than the
least sure of them. The words handed back are the written text's own (words.py's cut), so
`X-Word-Timestamps`, SRT / VTT and the page's captions still pair with what the client wrote.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Sequence

from gepard_demo.text.front_end import shared as front_end
from gepard_demo.text.lexicon import parse_cached

from .result import AlignedWord, Alignment
from .words import text_words

if TYPE_CHECKING:
    import numpy as np

    from gepard_demo.text.pieces import Piece

    from .aligner import Aligner


def _over(said: Sequence[AlignedWord]) -> dict:
    """One span and state for a written token from the spoken words of its piece."""
    timed = [w for w in said if w.timed]
    if not timed:
        why = "none of the words it is read as was found in the audio" if said else "it is not read as any word"
        return {"start": None, "end": None, "confidence": 0.0, "probability": 0.0, "state": "unaligned", "why": why}
    least = min(said, key=lambda w: w.confidence)
    state = "aligned" if all(w.state == "aligned" for w in said) else "low"
    why = "" if state == "aligned" else (least.why or "a word it is read as is not sure")
    starts = [w.start for w in timed if w.start is not None]  # a timed word has both
    ends = [w.end for w in timed if w.end is not None]
    return {"start": min(starts), "end": max(ends), "confidence": least.confidence,
            "probability": min(w.probability for w in said), "state": state, "why": why}


def fold(spoken: Alignment, pieces: Sequence[Piece]) -> Alignment:
    """`spoken`: the alignment of the pieces' spoken words joined; the written tokens, each timed
    over its piece's spoken words."""
    out: list[AlignedWord] = []
    at = 0
    for piece in pieces:
        n = len(text_words(piece.spoken))
        span = _over(spoken.words[at:at + n])
        at += n
        out += [AlignedWord(w.word, w.written, **span) for w in text_words(piece.written)]
    return dataclasses.replace(spoken, words=tuple(out))


def align_written(aligner: Aligner, audio: np.ndarray, sample_rate: int, text: str,
                  text_normalization: str = "off", lexicon_entries: str = "") -> Alignment:
    """`text`'s written words timed in `audio`, which says the front end's reading of it (under the
    request's text_normalization and lexicon_entries): as written where nothing changed it."""
    reading = front_end().read(text, text_normalization, parse_cached(lexicon_entries, "lexicon_entries"))
    if not any(p.changed for p in reading.pieces):
        return aligner.align(audio, sample_rate, text)
    return fold(aligner.align(audio, sample_rate, reading.spoken), reading.pieces)
