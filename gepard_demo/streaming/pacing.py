"""How many frames each chunk takes: the first `first_chunk_frames`, then a ramp (or vLLM-Omni's fixed size).

The listener vLLM-Omni's bench assumes (and the page is) starts playing at the first chunk and
plays in real time. Under the fixed schedule (vLLM-Omni's 10 then 86 frames) the second chunk,
86 frames, must be made while the first, 10 frames, plays: any RTF above about 10 / 86 = 0.12
starves that listener between them, which one loaded CPU or a busy server reaches at once.

The ramp sizes each later chunk by the audio already sent: the next chunk takes as many frames
as all the chunks before it (at least `first_chunk_frames`, at most `chunk_frames`): 10, 10, 20,
40, 80, then 86 at a time. While chunk k+1 is made, the listener plays everything sent before
it, as long as the stream runs at about twice real time (RTF <= ~0.5); chunks then grow to the
fixed size, so a 1000-frame utterance is cut 15 times instead of 12. The sizes depend on frame
counts only, never on the clock: every surface and every rerun cuts the same frames, so the
audio of a seed is the same bytes everywhere (ui/takes.py's re-cut replays the same cuts).
"""

from __future__ import annotations

from gepard_demo.settings import StreamSettings


def next_chunk_frames(stream: StreamSettings, sent_frames: int) -> int:
    """The frames the next chunk takes, after `sent_frames` frames were cut into chunks."""
    if sent_frames == 0:
        return stream.first_chunk_frames
    if stream.chunk_schedule == "fixed":
        return stream.chunk_frames
    return min(stream.chunk_frames, max(stream.first_chunk_frames, sent_frames))


def chunk_sizes(stream: StreamSettings, frames: int) -> list[int]:
    """The chunks `frames` frames are cut into, in order (the last may be short)."""
    sizes: list[int] = []
    sent = 0
    while sent < frames:
        size = min(next_chunk_frames(stream, sent), frames - sent)
        sizes.append(size)
        sent += size
    return sizes


def schedule_sizes(stream: StreamSettings) -> list[int]:
    """The distinct sizes of a long stream's whole chunks (a codec's chunk graphs: codec/graphed.py):
    the ramp doubles, so it reaches chunk_frames within 10 chunks from any first size."""
    sizes, sent = set(), 0
    for _ in range(16):
        size = next_chunk_frames(stream, sent)
        sizes.add(size)
        sent += size
    return sorted(sizes)


def decode_sizes(stream: StreamSettings) -> list[int]:
    """The frames a codec stream decodes at a time: its chunks, and in lookback mode each chunk
    with its lookback frames before it (the window it re-decodes)."""
    sizes = schedule_sizes(stream)
    if stream.decode_mode == "lookback":
        sizes = sorted(set(sizes) | {s + stream.lookback_frames for s in sizes})
    return sizes
