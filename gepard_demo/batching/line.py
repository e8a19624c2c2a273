"""The requests waiting for a scheduler's running batch, in order, and who may join it at a step.

Listened streams first, then look-ahead segments of long texts, then batch work, each in arrival
order; every waiter knows its place (`Ticket.ahead`) and, at the head, why it still waits
(`Ticket.reason`, from admission.py). A listened stream the rule would keep waiting takes the
places of running look-ahead segments when that lets it in: they leave the batch keeping their
frames and wait again, to go on from them (preemption). Everything here runs under the
scheduler's lock, on its thread or a caller's between steps.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from .admission import Costs, Newcomer, Running, refusal
from .tickets import Ticket

if TYPE_CHECKING:
    from gepard_demo.host_settings import BatchingSettings
    from gepard_demo.model.batch import DecodeLoop
    from gepard_demo.model.seams import Engine

    from .running import RunningRows


class WaitLine:
    def __init__(self, engine: Engine, settings: BatchingSettings, costs: Costs, running: RunningRows):
        """running: the requests in the batch (the scheduler's)."""
        self.engine, self.settings, self.costs, self.running = engine, settings, costs, running
        self.waiting: list[Ticket] = []
        self.preemptions = 0  # look-ahead rows that gave their place to a listened stream

    def add(self, ticket: Ticket) -> None:
        self.waiting.append(ticket)
        self.order()

    def leave(self, ticket: Ticket) -> bool:
        """A cancelled ticket leaves the line (False: it was not waiting)."""
        if ticket not in self.waiting:
            return False
        self.waiting.remove(ticket)
        self.order()
        return True

    def order(self) -> None:
        """Listened streams first, then look-ahead segments, then batch work, each in arrival order;
        every waiter learns its place."""
        self.waiting.sort(key=lambda t: (0 if t.listened else 1 if t.stream else 2, t.number))
        for k, t in enumerate(self.waiting):
            t.ahead = k

    def admissible(self, batch: DecodeLoop) -> list[Ticket]:
        """The line's head, for as long as the admission rule lets each in. A listened stream the rule
        would keep waiting takes the places of look-ahead segments, when that lets it in."""
        chosen: list[Ticket] = []
        for t in self.waiting:
            t.reason = None
        while self.waiting:
            t = self.waiting[0]
            why = refusal(self.settings, self.costs, *self._state(chosen, t))
            if why is not None and t.listened:
                victims = self._victims(chosen, t)
                if victims:
                    for v in victims:
                        self._preempt(batch, v)
                    self.order()  # the preempted wait behind the listened streams again
                    why = None
            if why is not None:
                t.reason = why  # in order: a later request does not overtake the head
                break
            chosen.append(self.waiting.pop(0))
        self.order()
        return chosen

    def _state(self, chosen: list[Ticket], newcomer: Ticket, without: tuple = ()) -> tuple[Running, Newcomer]:
        """The running batch as the rule sees it for `newcomer` (chosen ones counted in, `without`
        left out). A look-ahead newcomer answers only to the streams other sessions listen to."""
        now = time.perf_counter()
        tickets = [t for t in [*self.running, *chosen] if t not in without]
        listened = [t for t in tickets if t.listened and not (newcomer.look_ahead and t.group is newcomer.group)]
        leads = [t.lead_s(now) for t in listened if t.handle is not None]
        state = Running(len(tickets), sum(t.rows for t in tickets), len(listened), min(leads) if leads else None)
        return state, Newcomer(newcomer.rows, newcomer.prompt_tokens, newcomer.listened)

    def _victims(self, chosen: list[Ticket], t: Ticket) -> list[Ticket]:
        """The fewest running look-ahead tickets (latest first) whose places let `t` in, or none."""
        ahead = sorted((r for r in self.running if r.look_ahead), key=lambda r: -r.number)
        for k in range(1, len(ahead) + 1):
            if refusal(self.settings, self.costs, *self._state(chosen, t, tuple(ahead[:k]))) is None:
                return ahead[:k]
        return []

    def _preempt(self, batch: DecodeLoop, t: Ticket) -> None:
        """Between steps: `t` leaves the batch and waits again, keeping its frames, to go on from
        them (BatchRequest.replay, its noise drawn as far) when it is let in again."""
        self.running.preempt(batch, t)
        resume = torch.stack(t.codes) if t.codes else None
        t.request = self.engine.request(t.text, t.request.sampler.settings, t.request.speaker, resume)
        t.handle, t.preempted = None, t.preempted + 1
        self.preemptions += 1
        self.waiting.append(t)
