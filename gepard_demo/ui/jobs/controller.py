"""What the Generate and Stop buttons do.

Generate runs one SynthesisSession in its own thread, pushing every chunk into the job's
mailbox (which the PCM route streams to the browser), while the Gradio event only polls it
for progress text: the speed of generation never waits on Gradio's update loop. At the end it
writes the WAV and returns the stats and the p_stop plot. Gradio's queue lets
`host.concurrency` Generates run at once and lines up the rest. With a batching host
(model_host.ModelHost.batch) those sessions decode together, and one the scheduler keeps
waiting (the real-time rule) shows its wait line; without one, `host.lock` takes the engine for
the session, and keeps the Eval tab off it meanwhile. One client may run only
`TrafficSettings.per_client` of them at once: one more is refused as soon as it reaches the
handler, so a script's flood leaves Gradio's queue in milliseconds instead of holding every place.
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from pathlib import Path
from typing import Iterator

import gradio as gr

from gepard_demo.model.guards.stop_rule import threshold_of
from gepard_demo.settings import SamplingSettings, SettingsError
from gepard_demo.text.front_end import spoken_for
from gepard_demo.streaming.seams import Session
from gepard_demo.streaming.session import SynthesisStats
from gepard_demo.streaming.text_input import TextError, read_text_file
from gepard_demo.ui.audio_route import client_of
from gepard_demo.ui.captions import CaptionDesk
from gepard_demo.ui.hosts.page_host import PageHost
from gepard_demo.ui.jobs.queue_line import queue_status
from gepard_demo.ui.jobs.registry import JobError, JobRegistry
from gepard_demo.ui.jobs.recent import RecentRuns
from gepard_demo.ui.jobs.wav_sink import WavFolder
from gepard_demo.ui.jobs.work import JobWork, WorkOutcome
from gepard_demo.ui.page.controls import PageControls, read_controls
from gepard_demo.ui.page.pstop_plot import Trace, pstop_svg
from gepard_demo.ui.page.views import speak_summary, stats_markdown
from gepard_demo.ui.takes import Take
from gepard_demo.units import Json
from gepard_demo.voice.reference_audio import ReferenceAudioError
from gepard_demo.voice.similarity import ReferenceSimilarity

POLL_S = 0.25  # how often the page's progress line updates while audio streams
STOP_GRACE_S = 0.2  # after Stop, how long the handler waits for the session's thread before it answers
log = logging.getLogger("gepard_demo.ui")


class DemoController:
    """Generate/Stop handlers bound to one model host, job registry and WAV folder."""

    def __init__(self, host: PageHost, registry: JobRegistry, wav_dir: Path, keep_wavs: int = 50,
                 captions: CaptionDesk | None = None):
        """captions: where each segment's audio goes to be aligned, off the stream's path (captions.py)."""
        self.host = host
        self.captions = captions or CaptionDesk()
        self.registry = registry
        self.wavs = WavFolder(wav_dir, keep_wavs)
        self.wav_dir = self.wavs.path
        self.voices = host.voices()  # VoiceCloning locally, ServedVoices in front of a server
        self.recent = RecentRuns()
        self.similarity = ReferenceSimilarity()  # a take in a reference voice: how close it came
        self._work = JobWork(host, self.captions, self.wavs)

    def stats_for(self, job_id: str) -> SynthesisStats | None:
        return self.recent.get(job_id)

    # -- Generate ----------------------------------------------------------------------------

    def generate(self, job_id: str, values: Mapping[str, Json], request: gr.Request | None = None) -> Iterator[tuple]:
        """Gradio generator: (status, wav path, stats markdown, p_stop plot, take) updates.

        values: the controls by name (controls.CONTROL_NAMES; an API call may leave later ones
        out), read once into PageControls here, once the job is claimed; endpoints.py is the door
        Gradio and the API see. request: who asks, for the per-client limit (jobs.JobRegistry). The
        last output is the finished run as a Take (takes.py) for the visitor's session state, which
        the API does not show; the Takes panel numbers it and adds it to the list."""
        t0 = time.perf_counter()
        # API clients may leave the job id empty: they get a fresh one (and no live stream).
        job_id = job_id or secrets.token_hex(16)
        try:
            job = self.registry.claim(job_id, client_of(request))
        except JobError as exc:  # the same line on the page and through the API
            raise self._rejected("Cannot start", exc) from None
        queued_s = max(0.0, time.monotonic() - job.created)
        try:
            try:
                controls = read_controls(values, self.voices.speaker, self.registry.traffic, request_start=t0)
                session = self.host.new_session(controls.request)
            except (SettingsError, TextError) as exc:
                title = "Text not accepted" if isinstance(exc, TextError) else "Setting out of range"
                raise self._rejected(title, exc) from None
            except ReferenceAudioError as exc:
                raise self._rejected("Reference voice not usable", exc) from None
            job.attach(session)  # from here on, Stop reaches the session
            if job.cancelled:
                yield ("Stopped before it started.", None, "", None, gr.skip())
                return
            yield from self._run(job, session, controls, queued_s)
        finally:
            if not job.finished:
                job.finish()

    def speak(self, job_id: str, values: Mapping[str, Json], request: gr.Request | None = None) -> Iterator[tuple]:
        """The API's /speak (endpoints.py): Generate run to its end, then (its WAV, speak_summary).
        A generator, as Generate is: a caller that hangs up closes it, which stops the run."""
        job_id = job_id or secrets.token_hex(16)
        last: tuple = ()
        for last in self.generate(job_id, values, request):
            yield gr.skip(), gr.skip()
        status, wav, _stats, _plot, take = last
        yield wav, speak_summary(job_id, status, take if isinstance(take, Take) else None)

    def read_text_file(self, upload: object) -> str:
        """The .txt upload button: its text into the text box (UTF-8, within the page's limit), or
        an error naming the file (not UTF-8 text, binary, empty, only punctuation, too long)."""
        if upload is None:
            return gr.skip()
        path = getattr(upload, "name", upload)
        try:
            return read_text_file(str(path), self.registry.traffic.max_text_chars)
        except (TextError, OSError) as exc:
            raise self._rejected("Text file not accepted", exc) from None

    @staticmethod
    def _rejected(title: str, exc: Exception) -> gr.Error:
        """A refused request: one line in the log (no traceback: nothing is broken), and an
        error titled by what went wrong for the page / API client."""
        log.warning("rejected generate request (%s): %s", title.lower(), exc)
        # The title leads the message too: Gradio 6's toast heads every error "Error".
        return gr.Error(f"{title}: {exc}", title=title, print_exception=False)

    def _run(self, job, session: Session, controls: PageControls, queued_s: float):
        waiting = threading.Event()  # set while the Eval tab holds the engine
        # The WAV is written as the chunks stream (wav_sink.py): the session keeps no audio.
        sink = self.wavs.sink(job.job_id, session.sample_rate)
        session.keep_audio = False
        outcome: Future[WorkOutcome] = Future()  # what the job's thread returns
        # In the handler's context: a ZeroGPU call reads the visitor's request (their quota) from it.
        context = contextvars.copy_context()

        def work() -> None:
            outcome.set_result(context.run(self._work, job, session, sink, waiting))

        worker = threading.Thread(target=work, name=f"gepard-job-{job.job_id[:8]}", daemon=True)
        sampling = controls.sampling
        yield (f"Generating… (seed `{session.stats.seed}`)", None, "", live_plot(session, sampling), gr.skip())
        worker.start()
        try:
            while worker.is_alive():
                if session.cancelled:  # Stop: its thread ends at the next step, or sooner
                    worker.join(STOP_GRACE_S)
                    break  # still held by work that cannot be interrupted (a codec push): answer now
                worker.join(POLL_S)
                if worker.is_alive():
                    yield self._progress(job, session, sampling, waiting)
        finally:
            # The page went away or Gradio cancelled the event (it closes this generator on its
            # event loop, so nothing here may wait): the session frees the engine at once, and
            # its thread ends on its own.
            if worker.is_alive():
                session.cancel()
        error = outcome.result().error if outcome.done() else None  # not done: held past Stop (_done says so)
        if error is not None:
            raise self._failure(error) from None
        yield self._done(job, session, controls, queued_s, sink, held=worker.is_alive())

    def _progress(self, job, session: Session, sampling: SamplingSettings, waiting: threading.Event):
        """The page's update while the job runs: where it waits, or how far it got."""
        line = session.wait_line()
        if line:
            return (f"{line[0].upper()}{line[1:]}…", gr.skip(), gr.skip(), gr.skip(), gr.skip())
        if waiting.is_set():
            return ("Waiting for the model: an evaluation run is using it…", gr.skip(), gr.skip(), gr.skip(),
                    gr.skip())
        st = session.stats
        sent = job.nbytes / 4 / session.sample_rate
        return (f"Generating… {st.frames} frames, {sent:.2f} s of audio streamed (seed `{st.seed}`)",
                gr.skip(), gr.skip(), live_plot(session, sampling), gr.skip())

    def _failure(self, exc: BaseException) -> gr.Error:
        line = self.host.explain(exc)
        if line is not None:  # a refusal with a reason (ZeroGPU's quota, its queue): one line, no traceback
            log.warning("generate refused by the GPU host: %s", line)
            return gr.Error(line, title="GPU not available", print_exception=False)
        # A real fault: keep its traceback in the log.
        log.error("synthesis failed", exc_info=exc)
        return gr.Error(f"Synthesis failed: {exc!r}", title="Synthesis failed")

    def _done(self, job, session: Session, controls: PageControls, queued_s: float, sink, held: bool):
        """The page's last update: the status line, the WAV, the stats, the plot and the take.
        held: Stop answered while the job's thread still holds on (it is shown as stopped now)."""
        stats = session.stats
        winding_down = session.stop_note() if held else None
        if held:
            stats = dataclasses.replace(stats, cancelled=True)
        wav = self.wavs.close(sink)  # the worker's own close, or now if Stop left it held
        if controls.reference is not None and wav and not stats.cancelled:  # spoken in a reference voice
            stats.speaker_sim = self.similarity.score(controls.reference, wav)
        self.recent.note(job.job_id, stats)
        queued = f" · waited {queued_s:.1f} s in the queue" if queued_s >= 0.5 else ""
        state = "Stopped" if stats.cancelled else "Done"
        status = (
            f"{state}: {stats.audio_s:.2f} s of audio, first audio after "
            f"{(stats.ttfa_s or 0) * 1000:.0f} ms, seed `{stats.seed}`{queued}"
        ) + (f" ({winding_down})" if winding_down else "")
        take = self._take(session, controls, wav, job.job_id)
        return (status, wav, stats_markdown(stats, controls.sampling), final_plot(stats, controls.sampling), take)

    def _take(self, session: Session, controls: PageControls, wav: str | None, job_id: str = "") -> Take:
        """The finished run as a take: the controls as they ran (the seed used, not "random")."""
        stats = session.stats
        shown = dict(controls.values, seed=stats.seed, random_seed=False)
        codes = session.codes()
        model = self.host.info.name or self.host.requested
        stream = session.stream or controls.stream  # a served session has none
        return Take(0, session.text, shown, session.sampling, stream,
                    stats.as_dict(), codes if codes is not None and len(codes) else None, wav, str(model or ""),
                    job_id=job_id, spoken=spoken_for(session.text, session.sampling.text_normalization,
                                                     session.sampling.lexicon_entries))

    def rate_hint(self) -> float | None:
        """Audio seconds this host makes per wall second for one stream (recent.RecentRuns.stream_rate),
        else the warm-up's: the page's player sizes its start buffer from it until it has measured
        the stream itself."""
        rate = self.recent.stream_rate()
        return rate if rate is not None else self.host.warm_rate

    # -- Stop --------------------------------------------------------------------------------

    def stop(self, job_id: str) -> str:
        state = self.registry.cancel(job_id) if job_id else None
        if state == "running":
            return "Stopping…"
        if state == "queued":
            return "Stopped: it had not started yet."
        return "Nothing to stop."

    # -- the page's wait line ----------------------------------------------------------------

    def queue_status(self, job_id: str) -> dict:
        """Where a request stands before it starts (queue_line.queue_status)."""
        return queue_status(self.registry, job_id, self.recent.typical_wall_s())


def live_plot(session: Session, sampling: SamplingSettings) -> str:
    """The p_stop plot so far, with the probe's entropy (it fills at every poll while the utterance
    is made)."""
    st = session.stats
    return pstop_svg([Trace("this run", tuple(st.p_stop), entropy=tuple(st.entropy))], threshold_of(sampling),
                     live=True, movable=False)


def final_plot(stats: SynthesisStats, sampling: SamplingSettings) -> str:
    stop = stats.stop_frame if stats.stop_fired else None
    return pstop_svg([Trace("this run", tuple(stats.p_stop), stop, tuple(stats.entropy))], threshold_of(sampling))
