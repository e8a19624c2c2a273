"""A Generate's own thread: its session streamed into the job's mailbox, the WAV and the captions,
then the job finished, whatever happened. The Gradio handler (controller.py) only polls it, so
generation never waits on Gradio's update loop; the thread's `WorkOutcome` says how it went."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gepard_demo.streaming.seams import Session
    from gepard_demo.ui.captions import CaptionDesk
    from gepard_demo.ui.hosts.page_host import PageHost
    from gepard_demo.ui.jobs.mailbox import Job
    from gepard_demo.ui.jobs.wav_sink import WavFolder, WavSink

log = logging.getLogger("gepard_demo.ui")


@dataclass(frozen=True)
class WorkOutcome:
    """How a job's thread ended: error is what broke it (the handler shows it), None: it ran out
    (to the end, or stopped)."""

    error: BaseException | None = None


class JobWork:
    def __init__(self, host: PageHost, captions: CaptionDesk, wavs: WavFolder):
        self.host, self.captions, self.wavs = host, captions, wavs

    def __call__(self, job: Job, session: Session, sink: WavSink, waiting: threading.Event) -> WorkOutcome:
        """The job's thread: its outcome, a failure included (the handler shows it); `waiting` is set
        while the Eval tab holds the engine."""
        outcome = WorkOutcome()
        try:
            self._stream(job, session, sink, waiting)
        except BaseException as exc:  # shown to the user by the handler; the server keeps going
            outcome = WorkOutcome(exc)
        finally:
            self.wavs.close(sink)
            try:
                self.captions.finish(job.job_id, session)
            except Exception:  # noqa: BLE001  captions never hold the job
                log.exception("captions: the session's end was not handed over")
            job.finish(error=None if outcome.error is None else repr(outcome.error))
        return outcome

    def _stream(self, job: Job, session: Session, sink: WavSink, waiting: threading.Event) -> None:
        # A batching host's scheduler lines requests up itself (the Eval tab's batches too); behind
        # ZeroGPU each Generate is a GPU call of its own, scheduled by ZeroGPU.
        if self.host.own_turn:
            self._play(job, session, sink)
            return
        # The Eval tab may hold the engine: wait in line (it gives the engine back between its
        # batches), but stay stoppable.
        if self.host.lock.locked():
            waiting.set()
        if not self.host.lock.acquire(abort=lambda: session.cancelled):
            session.stats.cancelled = True
            return
        waiting.clear()
        try:
            self._play(job, session, sink)
        finally:
            self.host.lock.release()

    def _play(self, job: Job, session: Session, sink: WavSink) -> None:
        for chunk in session:
            job.put(chunk.samples)
            sink.write(chunk.samples)
            self.captions.feed(job.job_id, session, chunk.samples)  # hands over, never waits
