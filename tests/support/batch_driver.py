"""The engine's decode loop (engine.new_batch: DecodeBatch, or the fixed-shape loop) stepped by
hand, as the scheduler steps it: requests join mid-run (made by
GepardEngine.request, the one way every caller makes them) and each row's frames and end are
kept. Shared by the continuous-batching test and the guidance and guardrail reference tests."""

from __future__ import annotations

import torch


class Driver:
    def __init__(self, engine):
        self.engine = engine
        self.batch = engine.new_batch()
        self.frames: dict[int, list[torch.Tensor]] = {}
        self.ends: dict[int, str] = {}
        self.steps = 0

    def admit(self, text, settings, speaker=None) -> int:
        (h,) = self.batch.admit([self.engine.request(text, settings, speaker)])
        self.frames[h] = []
        return h

    def step(self) -> None:
        for h, st in self.batch.sample():
            if st.codes is not None:
                self.frames[h].append(st.codes)
            if st.done:
                self.ends[h] = st.done
        self.batch.advance()
        self.steps += 1

    def run_out(self) -> None:
        """Step until every row has ended."""
        while self.batch:
            self.step()

    def result(self, h) -> torch.Tensor:
        return torch.stack(self.frames[h])
