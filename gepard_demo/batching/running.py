"""The requests in a scheduler's running batch, by their rows' handle: let in (their prefill, in
groups), handed each step's frame, gone the step they end or are cancelled, or all failed at once
when a step raises. The scheduler's thread calls each; what a caller's thread may look at too (a
cancel, the load figures, the wait line's rule) it calls under its own lock, as each method says."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .admission import Costs
from .tickets import Ticket

if TYPE_CHECKING:
    from gepard_demo.model.batch import DecodeLoop
    from gepard_demo.model.generation import FrameStep


class RunningRows:
    def __init__(self, costs: Costs):
        self.costs = costs
        self.tickets: dict[int, Ticket] = {}  # handle -> ticket

    def __iter__(self) -> Iterator[Ticket]:
        """Under the lock: the tickets in the batch."""
        return iter(list(self.tickets.values()))

    def preempt(self, batch: DecodeLoop, t: Ticket) -> None:
        """Between steps, under the lock: `t`'s rows leave the batch now and it leaves the running
        set (the wait line takes it back, with its frames)."""
        assert t.handle is not None, "a running ticket has its rows' handle"
        batch.cancel(t.handle)
        del self.tickets[t.handle]

    def drop_ended(self, batch: DecodeLoop) -> None:
        """Under the lock: ended and cancelled requests leave the running set; a cancelled one's
        rows leave the batch (now between steps, else at its next advance)."""
        for h, t in list(self.tickets.items()):
            if t.cancelled and not t.done:
                batch.cancel(h)
            if t.done or t.cancelled:
                t.done = True
                del self.tickets[h]

    def admit(self, batch: DecodeLoop, tickets: list[Ticket]) -> list[tuple[int, Ticket]]:
        """Prefill newcomers together, those resuming from the same number of frames in one group;
        returns each one let in with its handle, for `register`. A group whose prefill fails ends."""
        groups: dict[int, list[Ticket]] = {}
        for t in tickets:
            groups.setdefault(t.request.resumed_from, []).append(t)
        placed: list[tuple[int, Ticket]] = []
        for group in groups.values():
            t0 = time.perf_counter()
            try:
                handles = batch.admit([t.request for t in group])
            except Exception as exc:  # noqa: BLE001 - this group's prefill failed: only its requests end
                end(group, exc)
                continue
            self.costs.note_prefill(time.perf_counter() - t0, sum(t.prompt_tokens for t in group))
            placed += zip(handles, group)
        return placed

    def register(self, batch: DecodeLoop, placed: list[tuple[int, Ticket]]) -> None:
        """Under the scheduler's lock: the admitted are running (one cancelled meanwhile leaves at once)."""
        for h, t in placed:
            t.handle = h
            self.tickets[h] = t
            if t.cancelled:
                batch.cancel(h)

    def hand_out(self, events: list[tuple[int, FrameStep]]) -> None:
        """Each request's step of the batch's sample, counted on its ticket, then handed to it."""
        now = time.perf_counter()
        for h, step in events:
            t = self.tickets[h]
            if step.codes is not None:
                t.frames += 1
                t.recent.append(now)
                if t.first_frame_at is None:
                    t.first_frame_at = now
                if t.codes is not None:  # a look-ahead ticket keeps its frames: a preemption resumes from them
                    t.codes.append(step.codes)
            if step.done:
                t.done = True
            if not t.cancelled:
                t.on_step(t, step)

    def take_all(self) -> list[Ticket]:
        """Under the scheduler's lock: every running ticket, gone from here (a failed step, a close)."""
        taken = list(self.tickets.values())
        self.tickets.clear()
        return taken


def end(tickets: list[Ticket], exc: BaseException) -> None:
    """Each ticket not yet done ends with `exc`, handed to its consumer."""
    for t in tickets:
        if not t.done:
            t.done = True
            t.on_step(t, exc)
