"""The page's "as written" mode in front of a speech server: the text goes to the server's speech
WebSocket (/v1/audio/speech/stream: ours, or vLLM-Omni's) word by word at the page's pace, as a
language model writes it, and each sentence's audio streams back in order as the page's audio.

The server's splitter cuts the sentences; the page's own units and moments (text_feed.write, the
same splitter) say when each sentence's last word was written, so the wait from it to the
sentence's first audio can be counted. Stop or a closed tab closes the WebSocket, which frees
every row the server made for it (serving/speech_stream.py).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from typing import TYPE_CHECKING, Iterator

import numpy as np

from gepard_demo.serving.client import ServedEnd, ServedFeatures, SpeechClient
from gepard_demo.serving.protocol import pcm16_to_float
from gepard_demo.serving.served_session import ServedSession
from gepard_demo.serving.stream_client import SpeakError, StreamingSpeech, Unit
from gepard_demo.streaming.chunks import AudioChunk
from gepard_demo.streaming.text_feed import pieces, write
from gepard_demo.units import SAMPLE_RATE, SAMPLES_PER_FRAME

if TYPE_CHECKING:
    from gepard_demo.streaming.seams import SessionRequest
    from gepard_demo.streaming.segments import Progress

_END = object()  # the connection's thread is done (after its last event or its error)
POLL_S = 0.05  # how often the connection checks for Stop while it waits on the server


class ServedWrittenSession(ServedSession):
    """ServedSession's checks and stats; its audio from the speech WebSocket, the text written at
    words_per_s."""

    def __init__(self, client: SpeechClient, request: SessionRequest, *, features: ServedFeatures = ServedFeatures()):
        """request.words_per_s: the pace the text is written at (required here)."""
        if request.words_per_s is None:
            raise ValueError("ServedWrittenSession needs request.words_per_s (ServedSession sends the text at once)")
        super().__init__(client, request, features=features)
        self.words_per_s = request.words_per_s
        self.written = write(self.text, request.words_per_s)
        self.segments = list(self.written.units)
        self.stats.segments = len(self.segments)
        self._ends_s: list[float] = []  # where each unit's audio ends in the stream, once it has
        self._t0: float | None = None

    def _config(self) -> dict:
        """session.config: what a REST request of ours carries (the seed: unit k takes segment k's)."""
        config = {"seed": self.sampling.seed, "max_new_tokens": self.sampling.max_frames, **self._extensions()}
        if self.ref_audio is not None:
            config["ref_audio"] = self.ref_audio
        return config

    async def _talk(self, events: queue.Queue) -> None:
        """The connection: words sent at their moments, every event handed to the page's thread."""
        t0 = self._t0
        assert t0 is not None  # set before the connection's thread starts
        async with StreamingSpeech(self.client.url, **self._config()) as speech:

            async def feed() -> None:
                for k, piece in enumerate(pieces(self.text)):
                    await asyncio.sleep(max(0.0, t0 + k / self.words_per_s - time.perf_counter()))
                    await speech.send(piece)
                await speech.finish()

            async def watch() -> None:  # Stop: the socket closes, and the server frees the rows
                while not self._cancel.is_set():
                    await asyncio.sleep(POLL_S)
                await speech.close()

            tasks = [asyncio.create_task(feed()), asyncio.create_task(watch())]
            try:
                async for event in speech.events():
                    events.put(event)
            finally:
                for task in tasks:
                    task.cancel()

    def _connect(self, events: queue.Queue) -> None:
        try:
            asyncio.run(self._talk(events))
        except BaseException as exc:  # noqa: BLE001  handed to the page's thread
            events.put(exc)
        finally:
            events.put(_END)

    def _generate(self) -> Iterator[AudioChunk]:
        t0 = self._t0 = self._request_start if self._request_start is not None else time.perf_counter()
        st, emitted, unit_start, over = self.stats, 0, 0, False
        events: queue.Queue = queue.Queue()
        threading.Thread(target=self._connect, args=(events,), name="gepard-written", daemon=True).start()
        try:
            while (item := events.get()) is not _END:
                if isinstance(item, BaseException):
                    if self.cancelled and isinstance(item, SpeakError):
                        continue  # the socket Stop closed
                    raise item
                kind, unit, frame = item
                if kind == "start":
                    unit_start = emitted
                elif kind == "done" and unit is not None:
                    if unit.error:
                        raise SpeakError(f"sentence {unit.index + 1}: {unit.error}")
                    self._ends_s.append(emitted / SAMPLE_RATE)
                    st.ended_by.append(ServedEnd.read({}, emitted - unit_start, self.sampling.max_frames).ended_by)
                elif kind == "audio" and frame:
                    yield self._chunk(pcm16_to_float(frame), emitted, unit if emitted == unit_start else None, t0)
                    emitted += len(frame) // 2
            over = True
        finally:
            if not over:  # Stop, a failure, or the page stopped reading: the socket closes
                self.cancel()
            st.cancelled = self.cancelled
            st.wall_s = st.gen_time_s = time.perf_counter() - t0
            st.audio_s = st.speech_s = emitted / SAMPLE_RATE
            st.rtf = st.wall_s / st.speech_s if st.speech_s else None
            st.complete = over and not st.cancelled

    def _chunk(self, samples: np.ndarray, emitted: int, first_of: Unit | None, t0: float) -> AudioChunk:
        """The next chunk, counted; first_of: the unit it begins (its wait is counted), or None."""
        st, now = self.stats, time.perf_counter() - t0
        if st.ttfa_s is None:
            st.ttfa_s = now
        if first_of is not None and first_of.index < len(self.written.written_s):
            st.text_waits_s.append(round(now - self.written.written_s[first_of.index], 3))
        self._keep(samples)
        st.chunks += 1
        st.frames = -(-(emitted + len(samples)) // SAMPLES_PER_FRAME)
        return AudioChunk(samples, SAMPLE_RATE, emitted, emitted // SAMPLES_PER_FRAME, st.frames, now)

    def progress(self) -> Progress:
        """The page's long-text line (streaming/segments.py's fields): the sentences the server has
        sent whole, where each ends in the audio, and when each was written."""
        done = len(self._ends_s)
        n = len(self.written.units)  # this session's segments
        return {"segments": n, "segment": min(done, n - 1), "generated": [k < done for k in range(n)],
                "ahead_s": 0.0, "rate": None, "text_rate": None, "ends_s": list(self._ends_s),
                "written_s": list(self.written.written_s)}


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Session

    _ServedWrittenSession_is_a_Session: type[Session] = ServedWrittenSession
