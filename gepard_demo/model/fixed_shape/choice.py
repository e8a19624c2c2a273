"""Which decode loop an engine runs, from the one `cuda_graphs` setting (speed/settings.py).

- off:  model/batch.DecodeBatch, the loop that grows its cache (every device).
- auto: on a CUDA device, the fixed-shape loop with its step captured as CUDA graphs (a failed
        capture runs that shape eagerly and says so); on a CPU, DecodeBatch: there the fixed shape
        computes every op too, so it is no faster (within 2% at the real shape, docs/PERFORMANCE.md §7).
- on:   the fixed-shape loop, its graphs required on a CUDA device (a failed capture is an error);
        on a CPU it runs eagerly: the way to run that loop without a GPU.

The fixed-shape loop needs an all-full-attention backbone (Gepard-1.0): a Gated-DeltaNet layer's
state has no column to keep per slot, so the hybrid layout keeps DecodeBatch ("on" refuses it).
"""

from __future__ import annotations

from dataclasses import dataclass

CUDA_GRAPHS = ("auto", "on", "off")


@dataclass(frozen=True)
class LoopChoice:
    fixed: bool  # the fixed-shape loop (model/fixed_shape/fixed_batch.py); False: DecodeBatch
    graphs: bool  # its step captured as CUDA graphs
    required: bool  # a failed capture is an error, not an eager shape
    reason: str

    def describe(self) -> str:
        loop = "fixed-shape step" + (", CUDA graphs" if self.graphs else ", eager") if self.fixed else "growing cache"
        return f"decode loop: {loop} ({self.reason})"


DYNAMIC = LoopChoice(False, False, False, "the default loop")


def choose_loop(cuda_graphs: str, device: str, full_attention: bool) -> LoopChoice:
    """The loop for `cuda_graphs` on `device` (ValueError naming cuda_graphs for what cannot run)."""
    if cuda_graphs not in CUDA_GRAPHS:
        raise ValueError(f"cuda_graphs must be one of {CUDA_GRAPHS}, got {cuda_graphs!r}")
    cuda = device.startswith("cuda")
    if cuda_graphs == "off":
        return LoopChoice(False, False, False, "cuda_graphs off")
    if not full_attention:
        if cuda_graphs == "on":
            raise ValueError("cuda_graphs=on needs an all-full-attention backbone (Gepard-1.0's layout); "
                             "this checkpoint has Gated-DeltaNet layers: use auto or off")
        return LoopChoice(False, False, False, "Gated-DeltaNet layers keep the growing cache")
    if cuda_graphs == "auto":
        if cuda:
            return LoopChoice(True, True, False, "auto on a CUDA device")
        return LoopChoice(False, False, False, "auto on a CPU: no graphs here, and the fixed shape is no faster")
    if cuda:
        return LoopChoice(True, True, True, "cuda_graphs on")
    return LoopChoice(True, False, False, "cuda_graphs on, on a CPU: the fixed-shape step runs eagerly")
