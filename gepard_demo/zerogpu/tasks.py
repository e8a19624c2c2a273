"""What runs inside a GPU call. Each function takes the `Resident` first and only picklable
values after it, and hands back only picklable values: a ZeroGPU worker is a forked process, so a
write to anything the main process holds (a job mailbox, a cache, a lock) would land in the
worker's copy and never be seen.

Failures come back as a `Failure` value (the last item of a stream) rather than as an exception:
ZeroGPU's wrapper turns an exception from the worker into "ZeroGPU worker error" and the class
name, losing the message a visitor needs. Requests are checked in the main process before the
call (text, settings, the reference window), so what fails here is a real fault.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from gepard_demo.streaming.session import AudioChunk, StepEvent, SynthesisSession, SynthesisStats
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.streaming.text_input import clean_text, split_text

from .batched import CallBatch
from .budget import CallPlan
from .carry import CallBounds, SessionCarry
from .resident import Resident

if TYPE_CHECKING:
    import torch

    from gepard_demo.model.seams import FrameEngine

R = TypeVar("R")


class GpuCallError(RuntimeError):
    """A GPU call failed; the message is the worker's exception, type and text."""


@dataclass(frozen=True)
class Failure:
    kind: str  # the exception's class name
    message: str
    trace: str

    @classmethod
    def of(cls, exc: BaseException) -> "Failure":
        return cls(type(exc).__name__, str(exc), "".join(traceback.format_exception(exc)))

    def error(self) -> GpuCallError:
        return GpuCallError(f"{self.kind}: {self.message}")


@dataclass(frozen=True)
class StreamRequest:
    """One call's part of an utterance, as the main process checked it (the text already cleaned,
    the seed fixed): from `carry` (None: the start), the segments `plan` covers, made together as
    rows of one batch, each up to the frames the plan gives it (budget.py, batched.py)."""

    utterance: SessionRequest  # the whole utterance; its speaker a (K, hidden) CPU prefix tensor or None
    carry: SessionCarry | None = None  # where the previous call stopped
    plan: CallPlan | None = None  # None: the whole utterance in this call (one segment at a time)
    ask_s: int | None = None  # what this call asks ZeroGPU for (budget.py), decided before it is scheduled


@dataclass(frozen=True)
class CallStart:
    """The first item of every stream call: which worker process took it and, when it was fresh,
    how long it took from its fork to this task (ZeroGPU's /allow, CUDA init, the weights to the
    GPU): the cold start the next calls' asks budget for (budget.StartTimes)."""

    pid: int
    cold_start_s: float | None  # None: a worker that served a call before (warm)


@dataclass(frozen=True)
class Prefix:
    """A reference voice's speaker prefix, made on the GPU (SpeakerPrefix without the audio)."""

    tokens: torch.Tensor  # (K, hidden) CPU tensor
    seconds: float
    frames: int
    compute_s: float


@dataclass(frozen=True)
class FrameCodes:
    """The utterance's committed frames' codes ((frames, 32) int16), sent before its stats so the
    page can re-cut the take at another threshold without another GPU call for the talker."""

    codes: np.ndarray


StreamItem = CallStart | AudioChunk | StepEvent | FrameCodes | SynthesisStats | SessionCarry | Failure


def stream(resident: Resident, request: StreamRequest) -> Generator[StreamItem]:
    """A CallStart, then the chunks with a StepEvent after each step of the playing segment, then
    either the SessionCarry the next call goes on from (with what the later segments have), or the
    utterance's codes and SynthesisStats (or a Failure). A step event every frame is what lets
    Stop end the call within a step: ZeroGPU (and the forked emulation) check for a stop between
    two yields, and the batch steps only when the session asks for a frame."""
    if not resident.calls:  # a fresh worker captures the decode step's graphs once: part of its cold start
        for capture in resident.engine.warm():
            print(f"zerogpu worker {os.getpid()}: captured {capture.describe()}", file=sys.stderr, flush=True)
    yield CallStart(os.getpid(), None if resident.calls else process_age_s())
    resident.calls += 1
    frames = None
    try:
        utterance = request.utterance
        speaker = utterance.prefix()
        if speaker is not None:  # sent on the CPU, so the request crosses into the worker without CUDA
            utterance = utterance.replace(speaker=speaker.to(resident.engine.device))
        engine: FrameEngine = resident.engine
        ahead = 0
        if request.plan is not None:  # the plan's segments, as rows of one batch (batched.py)
            engine = frames = CallBatch(resident.engine, split_text(clean_text(utterance.text)), utterance.sampling,
                                        utterance.prefix(), request.carry, request.plan.allotted())
            ahead = len(request.plan.frames) - 1
        session = SynthesisSession(engine, resident.codec, utterance, calls=CallBounds(request.carry), look_ahead=ahead)
        for event in session.events():
            yield event
        if (carry := session.carry) is not None:
            assert isinstance(carry, SessionCarry)  # what CallBounds hands over
            yield carry if frames is None else frames.carry(carry)
            return
        yield FrameCodes(session.codes())
        yield session.stats
    except Exception as exc:  # noqa: BLE001  handed back as a value (module docstring)
        yield Failure.of(exc)
    finally:
        if frames is not None:
            frames.close()  # a Stop, too: every row of the call's batch leaves


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc), None where that cannot be read."""
    try:
        start_ticks = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])
        uptime = float(open("/proc/uptime").read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def speaker_prefix(resident: Resident, samples: np.ndarray, rate: int) -> Prefix:
    """The prefix of a reference the main process already decoded and checked (a runner's `call`:
    what it raises comes back as a Failure)."""
    if resident.prefixer is None:
        raise RuntimeError(resident.no_cloning or "this model cannot clone a voice")
    t0 = time.perf_counter()
    prefix = resident.prefixer.from_array(samples, rate)
    return Prefix(prefix.tokens.detach().cpu(), prefix.seconds, prefix.frames, time.perf_counter() - t0)


def call(resident: Resident, fn: Callable[..., R], args: tuple) -> R | Failure:
    """fn(resident, *args): any module-level (so picklable by name) function, such as eval's
    batch synthesis."""
    try:
        return fn(resident, *args)
    except Exception as exc:  # noqa: BLE001
        return Failure.of(exc)


def unwrap(result: R | Failure) -> R:
    """A call's value, or its Failure raised as GpuCallError in the main process."""
    if isinstance(result, Failure):
        raise result.error()
    return result
