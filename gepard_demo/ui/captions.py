"""The page's captions: each text segment's words timed as soon as its audio is complete, off the
stream's path.

The Generate's worker thread calls `feed` with every chunk it hands the player (nothing waits: the
desk keeps only the samples of the segment not yet handed over, since the page keeps no session's
audio: a chapter's hour is on disk, wav_sink.py) and `finish` when the session ends. A segment whose
samples have all been emitted (its frames x 1024, SynthesisStats.segment_frames; the last one at
the session's end, with its end fade and silence) goes to one aligner thread through a bounded
queue; its words are kept by job id for the player to fetch (words_route.py) and for the take's
SRT and VTT. Nothing a listener, Stop or a closed tab waits on ever waits for an alignment: a
full queue skips the segment and says so. On ZeroGPU the chunks arrive in the main process, so
the alignment runs there, on the CPU, never inside a GPU call. In front of a server that serves
word_timestamps (served.py asks for them over SSE) the server's words are taken as they come.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gepard_demo.bounded import Bounded
from gepard_demo.alignment.result import Alignment, merge
from gepard_demo.alignment.written import align_written
from gepard_demo.streaming.chunks import segment_spans
from gepard_demo.units import SAMPLES_PER_FRAME

from gepard_demo.ui.jobs.registry import JOB_ID_RE

if TYPE_CHECKING:
    from gepard_demo.alignment.aligner import Aligner
    from gepard_demo.alignment.settings import AlignmentSettings
    from gepard_demo.streaming.seams import Session

QUEUE = 8  # segments waiting for the aligner, all jobs together (a segment's audio is up to 17 MB)
KEEP_JOBS = 256  # jobs whose words are kept (the newest)
log = logging.getLogger("gepard_demo.ui")


@dataclass
class JobWords:
    segments: list[str] = field(default_factory=list)
    reading: tuple[str, str] = ("off", "")  # the request's text_normalization and lexicon_entries (written.py)
    parts: dict[int, Alignment] = field(default_factory=dict)  # segment -> its words, placed in the utterance
    sent: int = 0  # segments handed to the aligner
    emitted: int = 0  # samples the player has been given
    pending: list = field(default_factory=list)  # the chunks from `pending_start` on, not yet handed over
    pending_start: int = 0
    expected: int | None = None  # segments to wait for, once the session ended
    notes: list[str] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)


class CaptionDesk:
    """aligner: a gepard_demo.alignment Aligner; served: the sessions bring the server's words
    (`word_alignment`); neither: captions off, and `off_reason` says why."""

    def __init__(self, aligner: Aligner | None = None, served: bool = False,
                 off_reason: str = "captions are off on this page"):
        self.aligner = aligner
        self.served = served
        self.off_reason = off_reason
        self._jobs: Bounded[str, JobWords] = Bounded(KEEP_JOBS)
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue(QUEUE)
        self._thread: threading.Thread | None = None

    @property
    def on(self) -> bool:
        return self.aligner is not None or self.served

    def _job(self, job_id: str, session: Session | None = None) -> JobWords:
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                if session is None:  # its first chunk makes a job's words, with the session in hand
                    raise KeyError(f"no caption job {job_id!r}")
                sampling = session.sampling
                job = self._jobs[job_id] = JobWords(list(session.segments or [session.text]),
                                                    (sampling.text_normalization, sampling.lexicon_entries))
            return job

    # -- the Generate's worker thread -----------------------------------------------------------

    def feed(self, job_id: str, session: Session, samples: np.ndarray) -> None:
        """After a chunk (its `samples`) went to the player: hand over the segments now complete."""
        if self.aligner is None:  # off, or the server's words come at the end
            return
        job = self._job(job_id, session)
        job.emitted += len(samples)
        job.pending.append(samples)
        # Where each segment that has ended is in the audio (after the silences of breaks before it).
        spans = segment_spans(list(session.stats.segment_frames), list(session.stats.segment_pauses), SAMPLES_PER_FRAME)
        while job.sent < len(spans) and job.sent < len(job.segments) - 1:  # the last one waits for finish()
            k = job.sent
            start, end = spans[k]
            if job.emitted < end:
                break
            self._send(job_id, job, session, k, start, end)

    def finish(self, job_id: str, session: Session) -> None:
        """The session ended (done, stopped or failed): the rest of its audio, whatever it holds."""
        if not self.on:
            return
        job = self._job(job_id, session)
        if self.aligner is None:  # the server's words, sent after the audio
            words = session.word_alignment
            job.parts[0] = words if isinstance(words, Alignment) else Alignment(note="the server sent no words for this one")
            job.expected = 1
            job.done.set()
            return
        ended, pauses = list(session.stats.segment_frames), list(session.stats.segment_pauses)
        start = sum(ended[: job.sent]) * SAMPLES_PER_FRAME + sum(pauses[: job.sent])
        total = job.emitted
        if job.sent < len(job.segments) and total > start:
            self._send(job_id, job, session, job.sent, start, total)
        job.expected = job.sent
        if not job.sent or len(job.parts) >= job.expected:
            job.done.set()

    def _send(self, job_id: str, job: JobWords, session: Session, k: int, start: int, end: int) -> None:
        job.sent = k + 1
        audio = _take(job, start, end)
        rate = int(session.sample_rate)
        try:
            self._queue.put_nowait((job_id, k, audio, rate, job.segments[k], start / rate, job.reading))
        except queue.Full:
            job.notes.append(f"segment {k + 1} was not aligned: the aligner is busy")
            job.parts[k] = Alignment(note="not aligned: the aligner was busy")
            return
        self._start()

    # -- the aligner's thread -------------------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="gepard-captions", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            job_id, k, audio, rate, text, offset, reading = self._queue.get()
            try:
                assert self.aligner is not None  # only queued where there is one (feed)
                part = align_written(self.aligner, audio, rate, text, *reading).shifted(offset)
            except Exception as exc:  # noqa: BLE001  the page says it; the page goes on
                log.exception("caption alignment failed")
                part = Alignment(note=f"the alignment failed ({type(exc).__name__})")
            with self._lock:
                job = self._jobs.get(job_id)
            if job is None:
                continue
            job.parts[k] = part
            if job.expected is not None and len(job.parts) >= job.expected:
                job.done.set()

    # -- the page's questions -------------------------------------------------------------------

    def alignment(self, job_id: str, wait_s: float = 0.0) -> Alignment | None:
        """The job's words so far (all of them once done; waits up to wait_s for that)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            return None
        job.done.wait(wait_s)
        return merge([job.parts[k] for k in sorted(job.parts)])

    def words(self, job_id: str) -> dict:
        """What the player fetches: state (off / unknown / pending / done), the words, one line."""
        if not self.on:
            return {"state": "off", "note": self.off_reason}
        if not JOB_ID_RE.match(job_id or ""):
            return {"state": "unknown", "note": "not a job id"}
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            return {"state": "unknown", "note": "no words for this job (yet)"}
        merged = merge([job.parts[k] for k in sorted(job.parts)])
        done = job.done.is_set()
        words = [{"w": w.written, "s": w.start, "e": w.end, "c": round(w.confidence, 2), "st": w.state, "why": w.why}
                 for w in merged.words]
        summary = merged.summary() if (merged.words or merged.note) else ""
        return {"state": "done" if done else "pending", "words": words, "summary": summary,
                "segments": {"aligned": len(job.parts), "of": len(job.segments)}, "notes": job.notes}


def subtitle_files(desk: CaptionDesk | None, job_id: str, folder: str | Path, stem: str,
                   wait_s: float = 10.0) -> list[str]:
    """A take's SRT and VTT beside its WAV, once its words are in (waits up to wait_s for the
    last segment's alignment): [] when captions are off or it has no timed word."""
    from gepard_demo.alignment.subtitles import to_srt, to_vtt

    if desk is None or not desk.on or not job_id:
        return []
    alignment = desk.alignment(job_id, wait_s)
    if alignment is None or not any(w.timed for w in alignment.words):
        return []
    out = []
    for kind, write in (("srt", to_srt), ("vtt", to_vtt)):
        path = Path(folder) / f"{stem}.{kind}"
        path.write_text(write(alignment), encoding="utf-8")
        out.append(str(path))
    return out


def load_in_background(settings: AlignmentSettings) -> CaptionDesk:
    """A desk whose aligner loads now on a thread of its own (the first Generate need not wait for
    the weights); weights that cannot be had turn captions off, with the reason on the page."""
    from gepard_demo.alignment.aligner import Aligner

    aligner = Aligner(settings)
    desk = CaptionDesk(aligner)

    def load() -> None:
        try:
            aligner.load()
        except Exception as exc:  # noqa: BLE001  no weights here: the page says so instead of failing
            log.warning("captions off: %s", exc)
            desk.off_reason = f"captions are off: the aligner's weights could not be loaded ({exc})"
            desk.aligner = None

    threading.Thread(target=load, name="gepard-captions-load", daemon=True).start()
    return desk


def _take(job: JobWords, start: int, end: int) -> np.ndarray:
    """Samples [start, end) of the utterance from the job's pending chunks; what comes before `end`
    is let go (a later segment starts there)."""
    held = np.concatenate(job.pending) if job.pending else np.zeros(0, np.float32)
    a, b = start - job.pending_start, end - job.pending_start
    audio = np.asarray(held[max(0, a):max(0, b)], dtype=np.float32)
    job.pending = [held[max(0, b):]] if len(held) > b else []
    job.pending_start = max(job.pending_start, end)
    return audio
