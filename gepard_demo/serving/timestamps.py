"""`word_timestamps` on our speech server: vLLM-Omni's field, served by our aligner.

vLLM-Omni 0.30 (serving_speech.py, protocol/audio.py; facts §16) answers `word_timestamps: true`
on a whole response with `X-Word-Timestamps`: the JSON list of {word, start_ms, end_ms} as
json.dumps writes it (ASCII-escaped), replaced past 4 KB by `X-Word-Timestamps-Omitted: oversize;
bytes=N; limit=4096`. Without `--forced-aligner` it refuses the field (400); with `stream=true` it
refuses it too (only its WebSocket streams them); its Gepard adapter refuses it always.

Ours, with `serve --word-timestamps` (an aligner: gepard_demo/alignment):
- a whole response: exactly vLLM-Omni's headers (alignment/result.py `timestamp_headers`), plus
  `X-Gepard-Word-Confidence` (the confidence of each word, null when unaligned) and, when there
  are none or something to know, `X-Gepard-Word-Timestamps-Note`; no speech or no alignable word:
  `X-Word-Timestamps: []` and the note (vLLM-Omni's WebSocket's "[] = silence");
- SSE: accepted (a difference from vLLM-Omni, listed in docs/DEPLOY.md): after the last audio
  delta and before `speech.audio.done`, one `speech.audio.word_timestamps` event carrying
  {timestamps, confidence, note}, shaped as the WebSocket's closing chunk (a list, [] for no
  speech, null when the alignment failed). The audio is never held back for it;
- a raw stream (stream_format "audio"): refused, naming the field: raw bytes have no place for
  anything but audio, and a client that asked for timestamps would silently get none.
Without an aligner the field is refused as vLLM-Omni without `--forced-aligner` refuses it.
Each text segment (a long text's) is aligned on its own audio, then placed in the utterance.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gepard_demo.alignment.result import Alignment, merge, wire_confidence, wire_timestamps
from gepard_demo.alignment.written import align_written
from gepard_demo.streaming.chunks import segment_spans

from .protocol import GEPARD_RULES, FieldRule, SpeechBody, sse_event, stream_mode

if TYPE_CHECKING:
    import numpy as np

    from gepard_demo.alignment.aligner import Aligner
    from gepard_demo.settings import SamplingSettings
    from gepard_demo.streaming.session import SynthesisSession

FIELD = "word_timestamps"
EVENT = "speech.audio.word_timestamps"
NO_ALIGNER = ("word_timestamps=true requires the server to be started with --word-timestamps "
              "(it lists `word_timestamps: true` in GET /v1/models); this one has no aligner")
RAW_REFUSED = ("word_timestamps is not sent on a raw audio stream (stream_format 'audio' carries audio bytes "
               "only): ask for SSE (stream=true, stream_format 'sse') or a whole response")
log = logging.getLogger(__name__)


def _raw(body: SpeechBody) -> bool:
    return body.word_timestamps and stream_mode(body.stream, body.stream_format) == "raw"


def request_rules(rules: tuple[FieldRule, ...] = GEPARD_RULES, aligner: bool = False) -> tuple[FieldRule, ...]:
    """The server's refusals with word_timestamps decided: refused outright without an aligner
    (vLLM-Omni's own message then), refused on a raw stream with one."""
    kept = tuple(r for r in rules if r.field != FIELD)
    if not aligner:
        return kept + (FieldRule(FIELD, lambda b: b.word_timestamps, NO_ALIGNER),)
    return kept + (FieldRule(FIELD, _raw, RAW_REFUSED),)


def segment_bounds(segment_frames: list[int], samples_per_frame: int, total: int,
                   segment_pauses: list[int] | None = None) -> list[tuple[int, int]]:
    """Each text segment's (first, end) sample in the utterance's audio: segment k holds its frames'
    samples, after the silence of any break before it (chunks.segment_spans); the last also holds
    the end fade and silence."""
    spans = segment_spans(segment_frames, segment_pauses or [], samples_per_frame)
    return [(min(a, total), total if k == len(spans) - 1 else min(b, total)) for k, (a, b) in enumerate(spans)]


def align_segments(aligner: Aligner, audio: np.ndarray, sample_rate: int, segments: list[str], segment_frames: list[int],
                   samples_per_frame: int, segment_pauses: list[int] | None = None,
                   sampling: SamplingSettings | None = None) -> Alignment:
    """Each segment's words aligned on its own audio, placed in the utterance: its written words,
    each over the span of the words it was read as (alignment/written.py; `sampling`'s
    text_normalization and lexicon_entries; None: read as written)."""
    reading = (sampling.text_normalization, sampling.lexicon_entries) if sampling is not None else ("off", "")
    if len(segment_frames) != len(segments):  # cut short: the segments that ran, the text they had
        segments = segments[: len(segment_frames)]
    parts = []
    for text, (a, b) in zip(segments, segment_bounds(segment_frames, samples_per_frame, len(audio), segment_pauses)):
        parts.append(align_written(aligner, audio[a:b], sample_rate, text, *reading).shifted(a / sample_rate))
    return merge(parts)


def align_session(aligner: Aligner, session: SynthesisSession) -> Alignment | None:
    """A finished session's words; None (logged) when the alignment itself failed."""
    try:
        st = session.stats
        return align_segments(aligner, session.audio(), session.sample_rate, list(session.segments or [session.text]),
                              list(st.segment_frames) or [st.frames], session.samples_per_frame, list(st.segment_pauses),
                              session.sampling)
    except Exception:  # noqa: BLE001  the audio is still answered; the client is told there are none
        log.exception("word alignment failed")
        return None


def failed_headers() -> dict[str, str]:
    return {"X-Gepard-Word-Timestamps-Note": "the word alignment failed (see the server's log): no timestamps"}


def timestamps_event(alignment: Alignment | None) -> bytes:
    """The SSE event: {timestamps, confidence, note}; timestamps null when the alignment failed."""
    if alignment is None:
        return sse_event(EVENT, {"timestamps": None, "confidence": None,
                                 "note": "the word alignment failed (see the server's log)"})
    return sse_event(EVENT, {"timestamps": wire_timestamps(alignment), "confidence": wire_confidence(alignment),
                             "note": alignment.note or None})


def models_entry(aligner: Aligner | None) -> dict:
    """What GET /v1/models says about word timestamps."""
    if aligner is None:
        return {"word_timestamps": False}
    s = aligner.settings
    return {"word_timestamps": True,
            "word_alignment": {"weights": s.weights, "low_confidence": s.low_confidence,
                               "streams": ["none", "sse"], "header_limit_bytes": 4096}}
