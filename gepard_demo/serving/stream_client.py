"""A client of the speech WebSocket (`/v1/audio/speech/stream`: ours, or vLLM-Omni's): text goes
in as it is written, each unit's audio comes back as it is made.

    async with StreamingSpeech("http://127.0.0.1:8091", seed=1) as speech:
        await speech.send("Hello there. How")   # input.text, as the text arrives
        await speech.send(" are you?")
        async for unit in speech.done():      # input.done, then each unit's audio as it comes
            ...                               # Unit(text, pcm int16, first_audio_s, ...)

A unit's `wait_s` is what a listener waits for it: from when the text that closed it was sent
to its first audio (vLLM-Omni's `audio.start` comes before it; the audio is what is heard).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gepard_demo.serving.stream_protocol import STREAM_PATH
from gepard_demo.streaming.text_splitter import TextSplitter


class SpeakError(RuntimeError):
    """The server refused something (its `error` message), or the connection broke."""


@dataclass
class Unit:
    """One unit's audio as the server sent it."""

    utterance: int
    index: int
    text: str
    sample_rate: int
    pcm: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    closed_at: float | None = None  # when the text that closed it was sent (perf_counter)
    first_audio_at: float | None = None
    error: str | None = None

    @property
    def wait_s(self) -> float | None:
        """From its last word sent to its first sound."""
        if self.closed_at is None or self.first_audio_at is None:
            return None
        return self.first_audio_at - self.closed_at


def ws_url(server_url: str) -> str:
    """The WebSocket route of a server given by its HTTP address (or already by its ws:// one)."""
    base = server_url.rstrip("/")
    for http, ws in (("https://", "wss://"), ("http://", "ws://")):
        if base.startswith(http):
            base = ws + base[len(http):]
    return base if base.endswith(STREAM_PATH) else base + STREAM_PATH


class StreamingSpeech:
    """One connection. `config`: the session.config fields (stream_audio / pcm / sentence
    splitting by default); the rates and seeds are the server's."""

    def __init__(self, server_url: str, **config: Any):
        self.url = ws_url(server_url)
        self.config = {"response_format": "pcm", "stream_audio": True, "split_granularity": "sentence", **config}
        # The server's cut points, mirrored here to know when each unit's text is complete.
        self._splitter = TextSplitter(self.config["split_granularity"])
        self._closed: list[float] = []  # per unit of this utterance: when its text was complete
        self._ws: Any = None
        self.utterance = 0

    async def __aenter__(self) -> "StreamingSpeech":
        import websockets

        try:
            self._ws = await websockets.connect(self.url, max_size=None)
        except OSError as exc:
            raise SpeakError(f"speech server at {self.url}: cannot connect ({exc})") from None
        except websockets.InvalidHandshake as exc:  # an HTTP answer: no speech WebSocket there
            raise SpeakError(f"speech server at {self.url}: no speech WebSocket ({exc})") from None
        await self._ws.send(json.dumps({"type": "session.config", **self.config}))
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection (the server stops every unit it started for it)."""
        if self._ws is not None:
            await self._ws.close()

    async def send(self, text: str) -> None:
        """A piece of text, as it arrives."""
        now = time.perf_counter()
        self._closed += [now] * len(self._splitter.feed(text))
        await self._ws.send(json.dumps({"type": "input.text", "text": text}))

    async def finish(self) -> None:
        """End the utterance (input.done); the connection stays open for the next one."""
        now = time.perf_counter()
        self._closed += [now] * len(self._splitter.flush())
        await self._ws.send(json.dumps({"type": "input.done"}))

    async def done(self) -> AsyncIterator[Unit]:
        """finish(), then each unit as its audio completes."""
        await self.finish()
        async for unit in self.units():
            yield unit

    async def units(self, on_audio: Callable[[int], None] | None = None) -> AsyncIterator[Unit]:
        """This utterance's units as their audio completes, until its session.done. on_audio:
        called with each binary frame's sample count as it arrives (a player's clock)."""
        async for kind, unit, frame in self.events():
            if kind == "audio" and on_audio is not None:
                on_audio(len(frame) // 2)
            elif kind == "done":
                assert unit is not None  # events() names the unit each "done" ends
                yield unit

    async def events(self) -> AsyncIterator[tuple[str, Unit | None, bytes]]:
        """This utterance's messages as they come, until its session.done: ("start", unit, b""),
        ("audio", unit, a binary frame of int16 PCM: None for a frame outside a unit), and
        ("done", unit, b"") with the unit's whole pcm."""
        import websockets

        unit: Unit | None = None
        parts: list[bytes] = []  # the unit's audio frames, joined once at its audio.done
        try:
            while True:
                raw = await self._ws.recv()
                if isinstance(raw, bytes):
                    if unit is not None:
                        if unit.first_audio_at is None and raw:
                            unit.first_audio_at = time.perf_counter()
                        parts.append(raw)
                    yield "audio", unit, raw
                    continue
                msg = json.loads(raw)
                kind = msg.get("type")
                if kind == "audio.start":
                    k = msg["sentence_index"]
                    unit = Unit(msg["utterance_index"], k, msg["sentence_text"], int(msg.get("sample_rate") or 24000),
                                closed_at=self._closed[k] if k < len(self._closed) else None)
                    parts = []
                    yield "start", unit, b""
                elif kind == "audio.done" and unit is not None:
                    unit.pcm = np.frombuffer(b"".join(parts), "<i2")
                    yield "done", unit, b""
                    unit = None
                elif kind == "error":
                    if unit is None:
                        raise SpeakError(msg.get("message", "error"))
                    unit.error = msg.get("message")
                elif kind == "session.done":
                    self._closed, self.utterance = [], self.utterance + 1
                    return
        except websockets.ConnectionClosed as exc:
            raise SpeakError(f"speech server at {self.url} closed the connection ({exc})") from None


async def speak_pieces(server_url: str, pieces: AsyncIterator[str], **config: Any) -> AsyncIterator[Unit]:
    """Speak text that arrives in pieces (stdin, a language model): each unit as its audio
    completes, while later pieces are still being sent."""
    async with StreamingSpeech(server_url, **config) as speech:

        async def feed():
            async for piece in pieces:
                await speech.send(piece)
            await speech.finish()

        feeding = asyncio.create_task(feed())
        try:
            async for unit in speech.units():
                yield unit
            await feeding
        finally:
            feeding.cancel()
