"""A step's outputs to the host without stopping the device: a non-blocking copy into one of two
reused pinned buffers, with an event, so the host reads step k while step k+1 computes.

Pinned buffers are allocated once (allocating pinned memory costs milliseconds: facts §18) and
alternate: step k's copy lands in slot k % 2, and the host reads that slot, waiting only on its
event, before step k+2's copy may reuse it. What the host keeps it clones, since the slot is
written again two steps later. On a CPU the copy is a plain copy.
"""

from __future__ import annotations

import torch

from .step import Outputs


class Readback:
    def __init__(self, out: Outputs):
        self.out = out
        cuda = out.ints.device.type == "cuda"
        self._slots = [Outputs(torch.empty_like(out.ints, device="cpu", pin_memory=cuda),
                               torch.empty_like(out.floats, device="cpu", pin_memory=cuda)) for _ in range(2)]
        self._events = [torch.cuda.Event() if cuda else None for _ in range(2)]
        self._next = 0

    def start(self) -> int:
        """Queue the copy of what the last step wrote; returns the slot to `read`."""
        slot = self._next
        self._next = 1 - slot
        host = self._slots[slot]
        host.ints.copy_(self.out.ints, non_blocking=True)
        host.floats.copy_(self.out.floats, non_blocking=True)
        event = self._events[slot]
        if event is not None:
            event.record()
        return slot

    def read(self, slot: int) -> Outputs:
        """That step's outputs on the host (waiting for its copy alone), as tensors of their own."""
        event = self._events[slot]
        if event is not None:
            event.synchronize()
        host = self._slots[slot]
        return Outputs(host.ints.clone(), host.floats.clone())
