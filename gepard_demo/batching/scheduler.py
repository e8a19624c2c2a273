"""BatchScheduler: one thread owns the engine's talker, and every caller's request decodes in one
running batch (continuous batching), admitted at step boundaries and gone the step it ends.

It is an Engine (model/seams.py) in front of the one it wraps (config, tokenizer, model_info,
prompt_ids ... are forwarded by name: seams.WrappedEngine):

    scheduler = BatchScheduler(engine, BatchingSettings(max_batch=4))
    for step in scheduler.stream_frames(FrameRequest(text, sampling, speaker=prefix)):  # as engine.stream_frames
        ...                                                                # close it: the row leaves
    results = scheduler.generate(texts, sampling)                          # as engine.generate
    for i, result in scheduler.generate_each(texts, sampling): ...         # as each one ends

so a SynthesisSession, the speech server and eval run on it unchanged. A request waits in a
queue (listened streams first, then look-ahead segments of long texts, then batch work, each in
arrival order) until admission.py lets it in; its `Ticket.wait_line()` says where it stands and
why. A look-ahead segment (`FrameRequest(..., look_ahead=True, group=session)`) is admitted
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

from typing import TYPE_CHECKING

import itertools
import queue
import threading
import time
from collections.abc import Iterator
from typing import Callable

import torch

from gepard_demo.model.generation import FrameStep, GenerationResult, ResultBuilder
from gepard_demo.model.request import FrameRequest
from gepard_demo.model.seams import Engine, WrappedEngine
from gepard_demo.settings import SamplingSettings
from gepard_demo.host_settings import BatchingSettings

from .admission import Costs
from .line import WaitLine
from .running import RunningRows, end
from .tickets import SchedulerClosed, Ticket, TicketFrames

class BatchScheduler(WrappedEngine):
    def __init__(self, engine: Engine, settings: BatchingSettings = BatchingSettings()):
        super().__init__(engine)
        self._settings = settings
        self.costs = Costs()
        self._cond = threading.Condition()
        self._rows = RunningRows(self.costs)  # the requests in the batch
        self._line = WaitLine(engine, settings, self.costs, self._rows)  # the requests not yet in it
        self._numbers = itertools.count()
        self._closed = False
        self._thread: threading.Thread | None = None

    # -- what callers use ------------------------------------------------------------------

    takes_look_ahead = True  # SynthesisSession: later segments of a long text may run ahead here

    @property
    def settings(self) -> BatchingSettings:
        """Fixed when the scheduler is made: its wait line admits by them (line.py), so changing
        them later would change nothing; build another scheduler instead."""
        return self._settings

    def stream_frames(self, request: FrameRequest) -> "TicketFrames":
        """One request's FrameSteps as they are made (engine.stream_frames' contract); closing the
        iterator cancels it, and its row leaves the batch at the next step. Its `wait_line()`
        says where it stands while it waits. look_ahead: a later segment of `group`'s text, made
        before its turn to play (the module docstring); `promote()` it when its turn comes. A
        running batch starts every row from its prompt: a `resume` is refused."""
        if request.resume is not None:
            raise ValueError("FrameRequest.resume: a running batch starts a request from its prompt; resume on an "
                             "engine of its own (a ZeroGPU call's batch)")
        handoff: queue.Queue = queue.Queue()
        ticket = self._ticket(request.text, request.sampling, request.speaker, True,
                              lambda t, item: handoff.put(item))
        ticket.look_ahead, ticket.group, ticket.text = request.look_ahead, request.group, request.text
        ticket.codes = [] if request.look_ahead else None
        return TicketFrames(self, self._enqueue(ticket), handoff)

    def promote(self, ticket: Ticket) -> None:
        """A look-ahead ticket's segment now plays: a listened stream from here on."""
        with self._cond:
            if ticket.look_ahead:
                ticket.look_ahead, ticket.codes = False, None
                self._line.order()
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
        settings = settings.with_concrete_seed()
        return Ticket(next(self._numbers), stream, self.engine.request(text, settings, speaker), on_step)

    def _enqueue(self, ticket: Ticket) -> Ticket:
        with self._cond:
            if self._closed:
                raise SchedulerClosed("the engine's scheduler is closed")
            self._line.add(ticket)
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
            if self._line.leave(ticket):
                ticket.done = True
            self._cond.notify_all()

    def note_decode(self, seconds: float, frames: int) -> None:
        """A stream's codec decode of `frames` frames took `seconds` (for the admission rule)."""
        self.costs.note_decode(seconds, frames)

    def load(self) -> dict:
        """Requests running and waiting, and the batch's backbone rows."""
        with self._cond:
            return {"running": len(self._rows.tickets), "waiting": len(self._line.waiting),
                    "rows": sum(t.rows for t in self._rows.tickets.values()), "max_batch": self.settings.max_batch,
                    "look_ahead": sum(t.look_ahead for t in self._rows.tickets.values()),
                    "preemptions": self._line.preemptions}

    def stopped(self) -> bool:
        """Its thread started and has ended (closed, or died): a stream waiting on it stops waiting."""
        return self._thread is not None and not self._thread.is_alive()

    def alive(self) -> bool:
        """Not closed, and its thread (once started) still running: a server's /health."""
        with self._cond:
            return not self._closed and not self.stopped()

    def close(self) -> None:
        """End every request (they raise SchedulerClosed) and stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)

    # -- the scheduler's thread ------------------------------------------------------------

    def _loop(self) -> None:
        batch = self.engine.new_batch()
        while True:
            with self._cond:
                while not self._closed and not self._line.waiting and not self._rows.tickets:
                    self._cond.wait()
                if self._closed:
                    break
                self._rows.drop_ended(batch)  # what was cancelled during the last step leaves now
                newcomers = self._line.admissible(batch)
            try:
                if newcomers:
                    placed = self._rows.admit(batch, newcomers)
                    with self._cond:
                        self._rows.register(batch, placed)
                if not batch:
                    continue
                t0 = time.perf_counter()
                rows = batch.row_count
                events = batch.sample()
                self._rows.hand_out(events)
                with self._cond:
                    self._rows.drop_ended(batch)  # no backbone step for a row that just ended or was closed
                batch.advance()
                self.costs.note_step(rows, time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - handed to every request in the batch
                with self._cond:
                    failed = self._rows.take_all()
                end(failed, exc)
                batch.close()
                batch = self.engine.new_batch()
        batch.close()
        self._end_all(SchedulerClosed("the engine's scheduler was closed"))

    def _end_all(self, exc: BaseException) -> None:
        with self._cond:
            left = self._rows.take_all() + self._line.waiting
            self._line.waiting.clear()
        end(left, exc)


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.model.seams import Engine

    _BatchScheduler_is_a_Engine: type[Engine] = BatchScheduler
