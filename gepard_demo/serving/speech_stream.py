"""The speech WebSocket on our server (`/v1/audio/speech/stream`; the messages: stream_protocol.py).

Text comes in pieces, as a language model writes it. The splitter (streaming/text_splitter.py)
cuts units as vLLM-Omni's does; each unit is a REST request of its own, checked as one
(SpeechService.check: the session's config is checked once when it comes, so a bad field is
refused there, naming it). Unlike the wheel, which makes one unit's audio before it reads the
next message, a unit starts generating as soon as it closes: while one unit's audio is sent,
the next ones (up to `ahead` at once) already run as rows of the running batch, so speech keeps
up with text that comes faster than it is spoken. Audio goes out in order, one unit after
another.

Unit k of an utterance takes the seed segment k of a long text takes (streaming/segments.py
`segment_seed`, from the config's seed, else the server's `--seed`, else one drawn per
utterance): each unit's audio is what a REST request of that text and seed gives.

A `<break time="500ms"/>` (streaming/breaks.py) inside a unit is its session's silence; one at a
unit's start or end is the unit's own leading or trailing zeros, exact, and a unit of breaks
alone is a unit of silence, so the splitter's units stay the wheel's.

A closed socket, at any moment, cancels every unit the connection started (their rows leave the
batch at the next step) and ends the connection's tasks.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
import numpy as np
from fastapi import WebSocket

from gepard_demo.serving import stream_protocol as sp
from gepard_demo.serving import timestamps
from gepard_demo.serving.operations import ServerMetrics
from gepard_demo.serving.protocol import encode_audio, pcm16
from gepard_demo.serving.service import REFUSALS, SpeechService, close_session, refusal
from gepard_demo.streaming.breaks import break_seconds, check_total, edge_breaks, pause_samples
from gepard_demo.streaming.segments import segment_seed
from gepard_demo.streaming.text_splitter import TextSplitter
from gepard_demo.units import SAMPLE_RATE

if TYPE_CHECKING:
    import torch

    from gepard_demo.alignment.aligner import Aligner
    from gepard_demo.streaming.session import SynthesisSession

log = logging.getLogger(__name__)

_END = object()  # a unit's chunk queue: its audio is all there


class _UnitFailed(Exception):
    """A unit refused, or its generation broke: told to the client in its turn."""

    def __init__(self, message: str, sent: int):
        super().__init__(message)
        self.sent = sent


@dataclass(eq=False)  # a unit is itself: kept in a set by identity
class _Unit:
    """One unit of text: its session (None: refused), its chunks as they are made."""

    utterance: int
    index: int
    text: str
    config: sp.StreamConfig  # the config it was made under (a new one may come before it is sent)
    session: SynthesisSession | None = None
    refused: str | None = None
    chunks: asyncio.Queue = field(default_factory=asyncio.Queue)
    task: asyncio.Task | None = None
    lead: int = 0  # samples of silence before its words (a <break> at its start: breaks.edge_breaks)
    trail: int = 0  # and after them (a <break> at its end)


class SpeechStreamHandler:
    """One handler per server; `handle` serves one connection until it ends."""

    def __init__(self, service: SpeechService, metrics: ServerMetrics, ahead: int = 2,
                 idle_timeout_s: float = sp.IDLE_TIMEOUT_S, config_timeout_s: float = sp.CONFIG_TIMEOUT_S):
        self.service, self.metrics = service, metrics  # a unit counts as one request
        self.ahead = ahead  # units generating at once beyond the one being sent
        self.idle_timeout_s = idle_timeout_s
        self.config_timeout_s = config_timeout_s

    async def handle(self, ws: WebSocket) -> None:
        await ws.accept()
        conn = _Connection(self, ws)
        try:
            await conn.run()
        finally:
            await conn.close()


class _Connection:
    def __init__(self, handler: SpeechStreamHandler, ws: WebSocket):
        self.handler, self.service, self.ws, self.metrics = handler, handler.service, ws, handler.metrics
        self.config: sp.StreamConfig | None = None
        self.extensions: dict = {}
        self.speaker: torch.Tensor | None = None
        self.splitter = TextSplitter("none")
        self.utterance = 0
        self.units_sent = 0  # units of this utterance so far
        self.open = False  # from an utterance's first text to its input.done
        self.seed: int | None = None  # this utterance's seed (unit k: segment_seed(seed, k))
        self.break_s = 0.0  # the silence this utterance's breaks asked for so far (at most breaks.MAX_BREAKS_S)
        self.generating = asyncio.Semaphore(1 + handler.ahead)
        self.units: set[_Unit] = set()
        self.sending = _Sender(ws, self.service.aligner)
        self._say = self.sending.say

    # -- reading ---------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            timeout = self.handler.config_timeout_s if self.config is None else self.handler.idle_timeout_s
            try:
                message = await asyncio.wait_for(self.ws.receive(), timeout)
            except asyncio.TimeoutError:
                if self.config is None:
                    return await self._fail("Timeout waiting for session.config")
                if self.sending.busy:  # the client waits for audio still coming: not idle
                    continue
                return await self._fail("Idle timeout: no message received")
            if message["type"] == "websocket.disconnect":
                return
            if message.get("text") is None:
                self._say(sp.error("binary frames are not accepted: send JSON text messages"))
                continue
            try:
                msg = sp.parse_message(message["text"])
                if await self._take(msg) == "close":
                    return await self._finish_and_close()
            except sp.StreamError as exc:
                if self.config is None:  # a bad handshake ends the connection, as the wheel's
                    return await self._fail(str(exc))
                self._say(sp.error(str(exc)))

    async def _take(self, msg: dict) -> str | None:
        kind = msg.get("type")
        if kind == "session.config":
            if self.open:
                raise sp.StreamError(sp.CONFIG_MID_UTTERANCE)
            await self._configure(msg)
        elif self.config is None:
            raise sp.StreamError(f"Expected session.config, got: {kind}")
        elif kind == "input.text":
            text = msg.get("text", "")
            if not isinstance(text, str):
                raise sp.StreamError("input.text requires a string value")
            self.open = self.open or bool(text)
            for unit in self.splitter.feed(text):
                self._start(unit)
        elif kind == "input.done":
            for unit in self.splitter.flush():
                self._start(unit)
            self._say(sp.session_done(self.utterance, self.units_sent))
            self.utterance, self.units_sent, self.open, self.seed = self.utterance + 1, 0, False, None
            self.break_s = 0.0
        elif kind == "session.close":
            return "close"
        else:
            raise sp.StreamError(f"Unknown message type: {kind}")
        return None

    async def _configure(self, msg: dict) -> None:
        """A session.config: checked as a REST request of its fields would be (the reference
        clip decoded once, here), then the connection's until the next one."""
        config, extensions = sp.parse_config(msg)
        if config.word_timestamps and self.service.aligner is None:
            raise sp.StreamError(sp.NO_ALIGNER)
        if config.word_timestamps and not (config.stream_audio and config.response_format == "pcm"):
            raise sp.StreamError(sp.TIMESTAMPS_NEED_PCM_STREAM)
        body = sp.sentence_body(config, extensions, "Hello.", config.seed)
        try:
            speaker = await self.service.speaker(self.service.check(body))
        except REFUSALS as exc:
            message, _, param = refusal(exc)
            raise sp.StreamError(f"Invalid session config: {param}: {message}" if param else
                                 f"Invalid session config: {message}") from None
        self.config, self.extensions, self.speaker = config, extensions, speaker
        self.splitter = TextSplitter(config.split_granularity)

    # -- generating ------------------------------------------------------------------------

    def _start(self, text: str) -> None:
        """A unit closed: its session starts now (as a row of the running batch, once fewer than
        1 + ahead units are generating), its audio is sent in its turn."""
        config = self.config
        assert config is not None  # text before a session.config is refused where it arrives
        if self.seed is None:  # the config's, else the server's --seed, else a fresh one per utterance
            given = [s for s in (config.seed, self.service.sampling.seed) if s is not None]
            self.seed = given[0] if given else secrets.randbelow(2**53)
        unit = _Unit(self.utterance, self.units_sent, text, config)
        self.units_sent += 1
        try:
            # A break at the unit's edge is silence between units: the unit's own, before or after
            # its words, exact; one inside it the unit's session makes (plan.py). A unit of breaks
            # alone is its silence.
            lead, words, trail = edge_breaks(text)
            self.break_s += break_seconds(text)
            check_total(self.break_s)
            unit.lead, unit.trail = pause_samples(lead, SAMPLE_RATE), pause_samples(trail, SAMPLE_RATE)
            if words:
                body = sp.sentence_body(config, self.extensions, words, segment_seed(self.seed, unit.index))
                # The voice this connection read at its config: a voice deleted since stays this session's.
                served = self.service.check(body, voice_held=self.speaker is not None)
                unit.session = self.service.session(served, self.speaker)
        except REFUSALS as exc:
            unit.refused = refusal(exc)[0]
            self.metrics.refused()
        if unit.refused is None and unit.lead:
            unit.chunks.put_nowait(np.zeros(unit.lead, np.float32))
        if unit.refused is None and unit.session is None:
            unit.chunks.put_nowait(np.zeros(unit.trail, np.float32))
            unit.chunks.put_nowait(_END)
        if unit.session is not None:
            self.units.add(unit)
            unit.task = asyncio.create_task(self._generate(unit, unit.session))
        self._say(unit)

    async def _generate(self, unit: _Unit, session: SynthesisSession) -> None:
        failed = False
        try:
            async with self.generating:
                it = iter(session)
                while (chunk := await anyio.to_thread.run_sync(next, it, None)) is not None:
                    if len(chunk.samples):
                        unit.chunks.put_nowait(chunk.samples)
            unit.chunks.put_nowait(np.zeros(unit.trail, np.float32))
            unit.chunks.put_nowait(_END)
        except Exception as exc:  # noqa: BLE001  told to the client in the unit's turn
            log.exception("speech stream: a unit failed")
            unit.chunks.put_nowait(exc)
            failed = True
        finally:
            try:  # a hang-up cancels this task natively (close() below): counted whatever the wait's fate
                await close_session(session)
            finally:
                self.units.discard(unit)
                self.metrics.ended(session, failed)

    # -- ending ----------------------------------------------------------------------------

    async def _fail(self, message: str) -> None:
        """A fatal refusal: said, then the connection ends."""
        self._say(sp.error(message))
        await self.sending.drain()
        await self.sending.close_socket()

    async def _finish_and_close(self) -> None:
        """session.close: what was asked before it is sent first, as the wheel's (which reads
        nothing while it generates) would have sent it."""
        await self.sending.drain()
        await self.sending.close_socket()

    async def close(self) -> None:
        """Every unit this connection started stops (its rows leave the batch), and the sender ends."""
        tasks = []
        for unit in list(self.units):  # each with its session and task (_start adds it with them)
            if unit.session is not None:
                unit.session.cancel()  # from any thread: the row leaves the batch at the next step
            if unit.task is not None:
                unit.task.cancel()
                tasks.append(unit.task)
        self.sending.task.cancel()
        await asyncio.gather(*tasks, self.sending.task, return_exceptions=True)


class _Sender:
    """What goes to the client, in order: messages, and each unit's audio and events in its turn,
    from one task; `busy` counts the items queued or being sent (the client waits for them: the
    connection is not idle)."""

    def __init__(self, ws: WebSocket, aligner: Aligner | None):
        self.ws, self.aligner = ws, aligner
        self.out: asyncio.Queue = asyncio.Queue()
        self.busy = 0
        self.task = asyncio.create_task(self._send_all())

    def say(self, item: _Unit | dict) -> None:  # a unit (its audio and events, in its turn), or a message
        self.busy += 1
        self.out.put_nowait(item)

    async def _send_all(self) -> None:
        try:
            while True:
                item = await self.out.get()
                try:
                    if isinstance(item, _Unit):
                        await self._send_unit(item)
                    else:
                        await self.ws.send_json(item)
                finally:
                    self.busy -= 1
                    self.out.task_done()
        except Exception:  # noqa: BLE001  the client went away (a send on a closed socket): nothing more to send
            log.debug("speech stream: sending ended", exc_info=True)

    async def _send_unit(self, unit: _Unit) -> None:
        await self.ws.send_json(sp.audio_start(unit.utterance, unit.index, unit.text, unit.config))
        try:
            sent, failed = await self._send_audio(unit), False
        except _UnitFailed as exc:
            sent, failed = exc.sent, True
            await self.ws.send_json(sp.error(f"Generation failed for utterance {unit.utterance}, sentence "
                                             f"{unit.index}: {exc}", partial_audio=exc.sent > 0))
        await self.ws.send_json(sp.audio_done(unit.utterance, unit.index, sent, failed))

    async def _send_audio(self, unit: _Unit) -> int:
        """The unit's audio, as the config asks: PCM as it is made (binary frames, or audio.chunk
        JSON frames and then the words), or one encoded file. Returns the audio bytes sent."""
        config, sent, parts, chunk_id = unit.config, 0, [], 0
        if unit.refused is not None:
            raise _UnitFailed(unit.refused, 0)
        while (item := await unit.chunks.get()) is not _END:
            if isinstance(item, Exception):
                raise _UnitFailed(f"{type(item).__name__}: {item}", sent)
            if not len(item):
                continue
            parts.append(item)
            if config.stream_audio:
                data, start = pcm16(item), sent // 2
                sent += len(data)
                if config.word_timestamps:
                    await self.ws.send_json(sp.audio_chunk(unit.utterance, unit.index, chunk_id, _ms(start),
                                                           _ms(sent // 2), data, None))
                    chunk_id += 1
                else:
                    await self.ws.send_bytes(data)
        if config.word_timestamps:  # after the audio: nothing the sound waits on
            words = await self._words(unit)
            await self.ws.send_json(sp.audio_chunk(unit.utterance, unit.index, chunk_id, 0, _ms(sent // 2), b"", words))
        elif not config.stream_audio:
            audio = np.concatenate(parts) if parts else np.zeros(0, np.float32)
            data, _ = encode_audio(audio, config.response_format)
            sent = len(data)
            await self.ws.send_bytes(data)
        return sent

    async def _words(self, unit: _Unit) -> list[dict] | None:
        """The unit's words for its closing audio.chunk, placed after its leading silence ([]: a
        unit of silence alone; None: the alignment failed)."""
        if unit.session is None:
            return []
        aligner = self.aligner
        assert aligner is not None, "a config asking for words was refused without an aligner (_configure)"
        alignment = await anyio.to_thread.run_sync(timestamps.align_session, aligner, unit.session)
        if alignment is None:
            return None
        lead = _ms(unit.lead)
        return [{**w, "start_ms": w["start_ms"] + lead, "end_ms": w["end_ms"] + lead}
                for w in timestamps.wire_timestamps(alignment)]

    async def drain(self) -> None:
        """Until everything queued is sent, or the sender has stopped (the client is gone)."""
        sent = asyncio.ensure_future(self.out.join())
        await asyncio.wait({sent, self.task}, return_when=asyncio.FIRST_COMPLETED)
        sent.cancel()

    async def close_socket(self) -> None:
        try:
            await self.ws.close()
        except RuntimeError:  # already closed
            pass


def _ms(samples: int) -> int:
    return int(round(samples / SAMPLE_RATE * 1000.0))
