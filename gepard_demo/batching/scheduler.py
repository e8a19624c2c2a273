"""BatchScheduler: one thread owns the engine's talker, and every caller's request decodes in one
running batch (continuous batching), admitted at step boundaries and gone the step it ends.

It is an Engine (model/seams.py) in front of the one it wraps (config, tokenizer, model_info,
prompt_ids ... are forwarded by name: seams.WrappedEngine):

    scheduler = BatchScheduler(engine, BatchingSettings(max_batch=4))
    for step in scheduler.stream_frames(text, sampling, speaker=prefix):   # as engine.stream_frames
        ...                                                                # close it: the row leaves
    results = scheduler.generate(texts, sampling)                          # as engine.generate
    for i, result in scheduler.generate_each(texts, sampling): ...         # as each one ends

so a SynthesisSession, the speech server and eval run on it unchanged. A request waits in a
queue (listened streams first, then look-ahead segments of long texts, then batch work, each in
arrival order) until admission.py lets it in; its `Ticket.wait_line()` says where it stands and
why. A look-ahead segment (`stream_frames(..., look_ahead=True, group=session)`) is admitted
while the streams other sessions listen to stay real time (its own session's do not hold it
back: the text as a whole is what plays), and gives its place back to a listened stream that
would otherwise wait (preemption; it keeps its frames and goes on from them later). The loop, on
the scheduler's thread:

    admit what may join (their prefill, as one padded group) -> sample a frame for every request
    -> hand each its FrameStep -> drop the cancelled -> one backbone step for the rest

Frames are handed over through a queue per stream, so the talker runs ahead of each consumer's
codec as speed/pipeline.py does for one. Streams report their decode time (`note_decode`, which
SynthesisSession calls when its engine has it) for the admission rule. An exception in the loop
ends every request then in the batch with it; the scheduler carries on with the queue.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterator
from typing import Callable

import torch

from gepard_demo.model.batch import DecodeLoop
from gepard_demo.model.generation import FrameStep, GenerationResult, ResultBuilder
from gepard_demo.model.seams import Engine, WrappedEngine
from gepard_demo.settings import SamplingSettings
from gepard_demo.host_settings import BatchingSettings

from .admission import Costs, Newcomer, Running, refusal
from .tickets import SchedulerClosed, Ticket, TicketFrames

class BatchScheduler(WrappedEngine):
    def __init__(self, engine: Engine, settings: BatchingSettings = BatchingSettings()):
        super().__init__(engine)
        self.settings = settings.validate()
        self.costs = Costs()
        self._cond = threading.Condition()
        self._queue: list[Ticket] = []
        self._running: dict[int, Ticket] = {}  # handle -> ticket
        self._numbers = itertools.count()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.preemptions = 0  # look-ahead rows that gave their place to a listened stream

    # -- what callers use ------------------------------------------------------------------

    takes_look_ahead = True  # SynthesisSession: later segments of a long text may run ahead here

    def stream_frames(self, text: str, settings: SamplingSettings, speaker: torch.Tensor | None = None, *,
                      look_ahead: bool = False, group: object = None) -> "TicketFrames":
        """One request's FrameSteps as they are made (engine.stream_frames' contract); closing the
        iterator cancels it, and its row leaves the batch at the next step. Its `wait_line()`
        says where it stands while it waits. look_ahead: a later segment of `group`'s text, made
        before its turn to play (the module docstring); `promote()` it when its turn comes."""
        handoff: queue.Queue = queue.Queue()
        ticket = self._ticket(text, settings, speaker, True, lambda t, item: handoff.put(item))
        ticket.look_ahead, ticket.group, ticket.text = look_ahead, group, text
        ticket.codes = [] if look_ahead else None
        return TicketFrames(self, self._enqueue(ticket), handoff)

    def promote(self, ticket: Ticket) -> None:
        """A look-ahead ticket's segment now plays: a listened stream from here on."""
        with self._cond:
            if ticket.look_ahead:
                ticket.look_ahead, ticket.codes = False, None
                self._order()
                self._cond.notify_all()

    def generate(self, texts: list[str], settings: SamplingSettings | list[SamplingSettings],
                 speakers: list[torch.Tensor | None] | None = None) -> list[GenerationResult]:
        """engine.generate's contract; the requests join the running batch as places free up."""
        out = dict(self.generate_each(texts, settings, speakers))
        return [out[i] for i in range(len(texts))]

    def generate_each(self, texts: list[str], settings: SamplingSettings | list[SamplingSettings],
                      speakers: list[torch.Tensor | None] | None = None) -> Iterator[tuple[int, GenerationResult]]:
        """(index, result) of each text as it ends, in the order they end."""
        settings = [settings] * len(texts) if isinstance(settings, SamplingSettings) else list(settings)
        speakers = speakers or [None] * len(texts)
        if not len(texts) == len(settings) == len(speakers):
            raise ValueError(f"{len(texts)} texts, {len(settings)} settings and {len(speakers)} speakers")
        finished: queue.Queue = queue.Queue()
        tickets = []
        for i, (text, s, sp) in enumerate(zip(texts, settings, speakers)):
            holder: dict = {}

            def on_step(t: Ticket, item, i=i, holder=holder):
                if isinstance(item, BaseException):
                    finished.put((i, item))
                elif holder["builder"].add(item):
                    finished.put((i, holder["builder"].result()))

            ticket = self._ticket(text, s, sp, False, on_step)
            req = ticket.request
            holder["builder"] = ResultBuilder(text, req.sampler.seed, len(req.prompt), req.sampler.settings,
                                              req.sampler.force_stop)
            tickets.append(ticket)
        for ticket in tickets:
            self._enqueue(ticket)
        try:
            for _ in texts:
                i, item = finished.get()
                if isinstance(item, BaseException):
                    raise item
                yield i, item
        finally:
            for t in tickets:
                self.cancel(t)

    def _ticket(self, text: str, settings: SamplingSettings, speaker: torch.Tensor | None, stream: bool,
                on_step: Callable[[Ticket, FrameStep | BaseException], None]) -> Ticket:
        """A request, checked (bad text or settings raise here, in the caller's thread)."""
        settings = settings.validate().with_concrete_seed()
        return Ticket(next(self._numbers), stream, self.engine.request(text, settings, speaker), on_step)

    def _enqueue(self, ticket: Ticket) -> Ticket:
        with self._cond:
            if self._closed:
                raise SchedulerClosed("the engine's scheduler is closed")
            self._queue.append(ticket)
            self._order()
            self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="gepard-scheduler", daemon=True)
                self._thread.start()
        return ticket

    def cancel(self, ticket: Ticket) -> None:
        """End a request from any thread: a queued one leaves the queue now, a running one's
        rows leave the batch at the next step boundary (the step in flight finishes first)."""
        with self._cond:
            if ticket.done:
                return
            ticket.cancelled = True
            if ticket in self._queue:
                self._queue.remove(ticket)
                ticket.done = True
                self._order()
            self._cond.notify_all()

    def note_decode(self, seconds: float, frames: int) -> None:
        """A stream's codec decode of `frames` frames took `seconds` (for the admission rule)."""
        self.costs.note_decode(seconds, frames)

    def load(self) -> dict:
        """Requests running and waiting, and the batch's backbone rows."""
        with self._cond:
            return {"running": len(self._running), "waiting": len(self._queue),
                    "rows": sum(t.rows for t in self._running.values()), "max_batch": self.settings.max_batch,
                    "look_ahead": sum(t.look_ahead for t in self._running.values()), "preemptions": self.preemptions}

    def stopped(self) -> bool:
        """Its thread started and has ended (closed, or died): a stream waiting on it stops waiting."""
        return self._thread is not None and not self._thread.is_alive()

    def close(self) -> None:
        """End every request (they raise SchedulerClosed) and stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    # -- the scheduler's thread ------------------------------------------------------------

    def _order(self) -> None:
        """Listened streams first, then look-ahead segments, then batch work, each in arrival order;
        every waiter learns its place."""
        self._queue.sort(key=lambda t: (0 if t.listened else 1 if t.stream else 2, t.number))
        for k, t in enumerate(self._queue):
            t.ahead = k

    def _loop(self) -> None:
        batch = self.engine.new_batch()
        while True:
            with self._cond:
                while not self._closed and not self._queue and not self._running:
                    self._cond.wait()
                if self._closed:
                    break
                self._drop_ended(batch)  # what was cancelled during the last step leaves now
                newcomers = self._admissible(batch)
            try:
                if newcomers:
                    self._admit(batch, newcomers)
                if not batch:
                    continue
                t0 = time.perf_counter()
                rows = batch.row_count
                events = batch.sample()
                self._hand_out(events)
                with self._cond:
                    self._drop_ended(batch)  # no backbone step for a row that just ended or was closed
                batch.advance()
                self.costs.note_step(rows, time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - handed to every request in the batch
                with self._cond:
                    failed = list(self._running.values())
                    self._running.clear()
                for t in failed:
                    t.done = True
                    t.on_step(t, exc)
                batch.close()
                batch = self.engine.new_batch()
        batch.close()
        self._end_all(SchedulerClosed("the engine's scheduler was closed"))

    def _drop_ended(self, batch: DecodeLoop) -> None:
        """Under the lock: ended and cancelled requests leave the running set; a cancelled one's
        rows leave the batch (now between steps, else at its next advance)."""
        for h, t in list(self._running.items()):
            if t.cancelled and not t.done:
                batch.cancel(h)
            if t.done or t.cancelled:
                t.done = True
                del self._running[h]

    def _state(self, chosen: list[Ticket], newcomer: Ticket, without: tuple = ()) -> tuple[Running, Newcomer]:
        """The running batch as the rule sees it for `newcomer` (chosen ones counted in, `without`
        left out). A look-ahead newcomer answers only to the streams other sessions listen to."""
        now = time.perf_counter()
        tickets = [t for t in [*self._running.values(), *chosen] if t not in without]
        listened = [t for t in tickets if t.listened and not (newcomer.look_ahead and t.group is newcomer.group)]
        leads = [t.lead_s(now) for t in listened if t.handle is not None]
        state = Running(len(tickets), sum(t.rows for t in tickets), len(listened), min(leads) if leads else None)
        return state, Newcomer(newcomer.rows, newcomer.prompt_tokens, newcomer.listened)

    def _admissible(self, batch: DecodeLoop) -> list[Ticket]:
        """The queue's head, for as long as the admission rule lets each in (under the lock). A
        listened stream the rule would keep waiting takes the places of look-ahead segments, when
        that lets it in."""
        chosen: list[Ticket] = []
        for t in self._queue:
            t.reason = None
        while self._queue:
            t = self._queue[0]
            why = refusal(self.settings, self.costs, *self._state(chosen, t))
            if why is not None and t.listened:
                victims = self._victims(chosen, t)
                if victims:
                    for v in victims:
                        self._preempt(batch, v)
                    self._order()  # the preempted wait behind the listened streams again
                    why = None
            if why is not None:
                t.reason = why  # in order: a later request does not overtake the head
                break
            chosen.append(self._queue.pop(0))
        self._order()
        return chosen

    def _victims(self, chosen: list[Ticket], t: Ticket) -> list[Ticket]:
        """The fewest running look-ahead tickets (latest first) whose places let `t` in, or none."""
        ahead = sorted((r for r in self._running.values() if r.look_ahead), key=lambda r: -r.number)
        for k in range(1, len(ahead) + 1):
            if refusal(self.settings, self.costs, *self._state(chosen, t, tuple(ahead[:k]))) is None:
                return ahead[:k]
        return []

    def _preempt(self, batch: DecodeLoop, t: Ticket) -> None:
        """Under the lock, between steps: `t` leaves the batch and waits again, keeping its frames,
        to go on from them (BatchRequest.replay, its noise drawn as far) when it is let in again."""
        batch.cancel(t.handle)
        del self._running[t.handle]
        resume = torch.stack(t.codes) if t.codes else None
        t.request = self.engine.request(t.text, t.request.sampler.settings, t.request.speaker, resume)
        t.handle, t.preempted = None, t.preempted + 1
        self.preemptions += 1
        self._queue.append(t)

    def _admit(self, batch: DecodeLoop, tickets: list[Ticket]) -> None:
        """Prefill newcomers together, those resuming from the same number of frames in one group."""
        groups: dict[int, list[Ticket]] = {}
        for t in tickets:
            groups.setdefault(t.request.resumed_from, []).append(t)
        for group in groups.values():
            self._admit_group(batch, group)

    def _admit_group(self, batch: DecodeLoop, tickets: list[Ticket]) -> None:
        t0 = time.perf_counter()
        try:
            handles = batch.admit([t.request for t in tickets])
        except Exception as exc:  # noqa: BLE001 - this group's prefill failed: only its requests end
            for t in tickets:
                t.done = True
                t.on_step(t, exc)
            return
        self.costs.note_prefill(time.perf_counter() - t0, sum(t.prompt_tokens for t in tickets))
        with self._cond:
            for h, t in zip(handles, tickets):
                t.handle = h
                self._running[h] = t
                if t.cancelled:
                    batch.cancel(h)

    def _hand_out(self, events: list[tuple[int, FrameStep]]) -> None:
        now = time.perf_counter()
        for h, step in events:
            t = self._running[h]
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

    def _end_all(self, exc: BaseException) -> None:
        with self._cond:
            left = list(self._running.values()) + self._queue
            self._running.clear()
            self._queue.clear()
        for t in left:
            if not t.done:
                t.done = True
                t.on_step(t, exc)
