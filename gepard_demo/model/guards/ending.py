"""How a run ended: one value, `ended_by`, and every flag derived from it.

A request ends in one of three ways (model/batch.py decides which): the stop head fired
("stop"), the frame budget ran out ("budget"), or the authors' force stop capped it
("force_stop", guardrails.py). A session can also be closed before its end ("cancel"). The
flags every surface shows (stop_fired, runaway, force_stopped) are read from that one value by
`Ended`, so no writer sets them by hand and none can disagree with ended_by.
"""

from __future__ import annotations

from collections.abc import Sequence

STOP = "stop"
BUDGET = "budget"
FORCE_STOP = "force_stop"
CANCEL = "cancel"
# Both count as runaways: the force stop is a runaway the authors' guard caught.
RUNAWAY_ENDS = (BUDGET, FORCE_STOP)


def utterance_end(segment_ends: Sequence[str], cancelled: bool = False) -> str:
    """A whole utterance's end from its segments' (a long text is several requests): "cancel" if
    it was closed, else "force_stop" if a segment was force-stopped, else "budget" if one ran to
    its budget, else "stop" (every segment's stop head fired)."""
    if cancelled or CANCEL in segment_ends:
        return CANCEL
    for end in (FORCE_STOP, BUDGET):
        if end in segment_ends:
            return end
    return STOP


class Ended:
    """The flags of a result whose `ended_by` says how it ended (None: unknown, as for Piper or
    a folder of WAVs; every flag is then None too)."""

    ended_by: str | None

    @property
    def stop_fired(self) -> bool | None:
        return None if self.ended_by is None else self.ended_by == STOP

    @property
    def runaway(self) -> bool | None:
        return None if self.ended_by is None else self.ended_by in RUNAWAY_ENDS

    @property
    def force_stopped(self) -> bool | None:
        return None if self.ended_by is None else self.ended_by == FORCE_STOP
