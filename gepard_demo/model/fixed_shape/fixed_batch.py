"""`FixedBatch`: the decode loop at fixed shapes, the step captured as a CUDA graph on a GPU. It
keeps `model/batch.DecodeBatch`'s surface (admit, sample, cancel, advance, len, row_count, steps),
so the scheduler, the engine and a ZeroGPU call drive either loop the same way.

    admit    prefill the newcomers together (model/batch.prefill), copy each row into a free slot
             of the borrowed shape (shapes.py; a bigger bucket when it is full), fill its tables
    sample   draw each sampled row's noise from its own generator, run one step (a graph replay),
             and hand out that step's frames; with `look_ahead` (a GPU), step k+1 is queued before
             step k's outputs are read, so the device never waits for the host
    cancel   the row leaves at the next advance (or now, between steps)
    advance  free the slots of rows that ended or left; the backbone work is the next step's

The stop is decided on the device (step.py) and read one step late: a row that stopped at step k
is already inactive in step k+1 on the device, so the one step queued behind it commits nothing of
it, and what that step computed for it is dropped; `max_frames`, the force stop and the guidance's
end are decided there too, so each row ends at exactly the frame the other loop ends it at. A
cancel (a hang-up, the scheduler's preemption, a ZeroGPU call's pause) reaches the device with
the next step; a step already queued for that row is dropped on the host.

Noise: each sampled row draws `torch.rand(heads, levels)` from its own generator into the
step's uniform buffer before the step runs (one draw per step, the shape and order of
model/sampling.RowSampler.noise), and the step turns it into Gumbel noise. So a seed gives the
same frames as in DecodeBatch, and the draws are asynchronous launches: no step waits on the host.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from gepard_demo.model.batch import BatchRequest, prefill
from gepard_demo.model.generation import FrameStep
from gepard_demo.model.sampling import RowSampler

from .placing import place
from .row_settings import NEVER
from .shapes import Shape, StepShapes
from .step import ENDS, STOP, Outputs

# Columns a newcomer is given room for beyond its prompt, at most: a longer row grows the shape
# when it gets there (an endless request never needs a shape of its whole budget).
FRAME_HORIZON = 2048


@dataclass
class _Live:
    sampler: RowSampler
    slot: int
    guide_slot: int | None  # its guidance row's slot, while guided
    start: float
    width: int  # the columns its prefill took
    committed: int
    done: bool = False
    cancelled: bool = False


class FixedBatch:
    def __init__(self, shapes: StepShapes, look_ahead: bool | None = None):
        self.shapes = shapes
        self.talker = shapes.talker
        self.look_ahead = self.talker.device.type == "cuda" if look_ahead is None else look_ahead
        self.shape: Shape | None = None
        self.live: dict[int, _Live] = {}
        self.slots: dict[int, tuple[int, bool]] = {}  # slot -> (handle, is the guidance row)
        self._next_handle = 0
        self._sampled = False
        self._queued: tuple[int, dict[int, tuple[int, bool]]] | None = None  # (readback slot, slots it ran)
        self._held: tuple[Outputs, dict[int, tuple[int, bool]]] | None = None  # a queued step's outputs, read
        # early because the shape changed under it
        self.steps = 0

    def __len__(self) -> int:
        return len(self.live)

    @property
    def _current(self) -> Shape:
        """The shape the rows are in: there is one from the first admit while any row is live."""
        assert self.shape is not None, "no shape: the batch has no rows"
        return self.shape

    @property
    def row_count(self) -> int:
        return len(self.slots)

    # -- joining -------------------------------------------------------------------------

    def admit(self, requests: list[BatchRequest]) -> list[int]:
        if self._sampled:
            raise RuntimeError("admit between steps: after advance(), before sample()")
        if not requests:
            return []
        handles = list(range(self._next_handle, self._next_handle + len(requests)))
        self._next_handle += len(requests)
        by_handle = dict(zip(handles, requests))
        done = prefill(self.talker, by_handle)
        width = done.mask.shape[1]
        horizon = max(min(r.sampler.settings.max_frames - done.replayed, FRAME_HORIZON) for r in requests)
        with torch.inference_mode():
            self._fit(len(self.slots) + len(done.rows), width + horizon + 2)
            free = [s for s in range(self._current.rows) if s not in self.slots]
            slot_of = place(self._current, free, done, by_handle)
            self.slots.update({slot: row for row, slot in slot_of.items()})
        now = time.perf_counter()
        for h in handles:
            request = by_handle[h]
            guide = slot_of.get((h, True))
            self.live[h] = _Live(request.sampler, slot_of[(h, False)], guide, now, width, done.replayed)
        return handles

    def _fit(self, rows: int, columns: int) -> None:
        """A shape of at least rows x columns, the rows placed so far copied over when it grows."""
        shape = self.shape
        if shape is not None and rows <= shape.rows and columns <= shape.columns:
            return
        bigger = self.shapes.acquire(max(rows, shape.rows if shape else 0), max(columns, shape.columns if shape else 0))
        if shape is not None:
            self._drain()
            used = max(self.slots) + 1 if self.slots else 0
            shape.tables.copy_rows_into(bigger.tables, used)
            shape.cache.copy_rows_into(bigger.cache, used)
            self.shapes.release(shape)
        self.shape = bigger

    def _drain(self) -> None:
        """A queued step's outputs would be read from the old shape: read and keep them first."""
        if self._queued is not None:
            slot, ran = self._queued
            self._held = (self._current.readback.read(slot), ran)
            self._queued = None

    # -- one step --------------------------------------------------------------------------

    def sample(self) -> list[tuple[int, FrameStep]]:
        if self._sampled:
            raise RuntimeError("sample() twice without advance()")
        if not self.live:
            return []
        self._sampled = True
        with torch.inference_mode():
            self._grow_columns()
            held = self._held
            self._held = None
            if held is None:
                slot, ran = self._queued if self._queued is not None else self._launch()
                self._queued = None
                if self.look_ahead:
                    self._launch()
                outputs = self._current.readback.read(slot)
            else:
                outputs, ran = held
        return self._events(outputs, ran)

    def _launch(self) -> tuple[int, dict[int, tuple[int, bool]]]:
        """Draw the sampled rows' noise, run one step, queue its outputs' copy to the host; returns
        what was queued (the readback slot, and the slots the step ran)."""
        shape = self._current
        t = shape.tables
        for h, st in self.live.items():
            if not (st.done or st.cancelled or st.sampler.settings.greedy):
                st.sampler.uniform(t.uniform.shape[1:], t.uniform.device, out=t.uniform[st.slot])
        shape.run()
        self._queued = (shape.readback.start(), dict(self.slots))
        return self._queued

    def _grow_columns(self) -> None:
        """Room for two more positions per row (the step run now and one queued behind it)."""
        need = max((st.width + st.committed + 3 for st in self.live.values() if not st.done), default=0)
        if need > self._current.columns:
            self._fit(len(self.slots), need + FRAME_HORIZON // 8)

    def _events(self, outputs: Outputs, ran: dict[int, tuple[int, bool]]) -> list[tuple[int, FrameStep]]:
        now = time.perf_counter()
        clock = self.steps
        self.steps += 1
        ints = outputs.ints
        ends = ints[:, -2:].tolist()  # host memory already (readback.py): plain reads, no device sync
        floats = outputs.floats.tolist()
        events = []
        for slot, (h, unc) in ran.items():
            st = self.live.get(h)
            if unc or st is None or st.done or st.cancelled or st.slot != slot:
                continue  # a guidance row, or a row that ended before this step was read: its work is dropped
            index, end = ends[slot][0], ENDS[ends[slot][1]]
            p, entropy, nll = floats[slot]
            st.done = end is not None
            if end == STOP:
                events.append((h, FrameStep(index, None, p, now - st.start, end, clock, entropy)))
                continue
            st.committed = index + 1
            events.append((h, FrameStep(index, ints[slot, :-2], p, now - st.start, end, clock, entropy, nll)))
        return events

    def cancel(self, handle: int) -> None:
        if handle in self.live:
            self.live[handle].cancelled = True
            if not self._sampled:
                self._release()

    def close(self) -> None:
        """End every request and give the shape back (its graphs stay with the engine)."""
        for st in self.live.values():
            st.cancelled = True
        self._sampled = False
        self._release()

    def advance(self) -> None:
        if not self._sampled:
            raise RuntimeError("advance() before sample()")
        self._sampled = False
        self._release()

    def _release(self) -> None:
        """Free the slots of rows that ended or left, and of guidance rows past their frames."""
        gone: list[int] = []
        for h, st in list(self.live.items()):
            if st.done or st.cancelled:
                gone += [st.slot] + ([st.guide_slot] if st.guide_slot is not None else [])
                del self.live[h]
            elif st.guide_slot is not None and st.committed >= (st.sampler.settings.cfg_frames or NEVER):
                gone.append(st.guide_slot)
                st.guide_slot = None
        if not gone:
            return
        for slot in gone:
            del self.slots[slot]
        with torch.inference_mode():
            tables = self._current.tables
            tables.free(torch.tensor(gone, device=tables.active.device))
            if not self.live:
                self._drain()
                self._held = None
                self.shapes.release(self._current)
                self.shape = None
                self.slots.clear()

