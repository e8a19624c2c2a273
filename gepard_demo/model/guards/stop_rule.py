"""Where an utterance stops at another threshold, from one run's p_stop trace (no new decoding).

The stop threshold only decides whether a step commits: the engine commits step 0 always, and at
step j >= 1 stops (committing nothing) when p_stop[j] > threshold. A seeded run's frames are the
same for every threshold up to where it stops, so a lower threshold's utterance is a prefix of a
higher one's. The page's re-cut and eval's one-pass sweep (eval/sweeps/thresholds.py) both use
this module, so they apply the same rule.

A run ended by its frame budget, or by a force stop (guardrails.py), tells every lower threshold:
neither end depends on the threshold, so a lower one either stops earlier on the same p_stop trace
or runs to the same end. Pass the run's force stop (resolved: "auto" is per text) as `force_stop`;
the derived utterance keeps it (a re-cut or a sweep point of a force-stopped run is at the same
force_stop_frames). Where the budget and the force stop fall on the same frame, the budget ended
it (the authors' runner's order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gepard_demo.model.guards.ending import BUDGET, FORCE_STOP, STOP, Ended

if TYPE_CHECKING:
    from gepard_demo.settings import SamplingSettings

# The setting this rule reads, by name: the axis the page's re-cut and eval's one-pass sweep move
# along (a column of a sweep's table, a key of a run's settings JSON).
THRESHOLD = "stop_threshold"
# The settings that only cut a generation short (derive, capped): runs that differ in these alone
# are one generation's prefixes (the page's re-cut, eval's one-pass sweep).
CUT_ONLY = (THRESHOLD, "force_stop_frames")


def threshold_of(sampling: SamplingSettings) -> float:
    """The threshold these settings stop at."""
    return sampling.stop_threshold


def at_threshold(sampling: SamplingSettings, threshold: float) -> SamplingSettings:
    """These settings stopping at another threshold (a re-cut, a one-pass sweep's point)."""
    return sampling.replace(stop_threshold=threshold)


@dataclass(frozen=True)
class Derived(Ended):
    """One threshold's utterance as a prefix of a source run."""

    frames: int  # frames committed
    stop_frame: int | None
    p_stop: list[float]  # one per step, the stop step included (as GenerationResult.p_stop)
    ended_by: str = STOP  # "stop", "budget" or "force_stop" (ending.py): the flags follow


def stop_step(p_stop: list[float], threshold: float) -> int | None:
    """The first step j >= 1 with p_stop[j] > threshold, or None."""
    for j in range(1, len(p_stop)):
        if p_stop[j] > threshold:
            return j
    return None


def _cap(frames: int, max_frames: int, force_stop: int | None) -> str | None:
    """How a run that did not stop ended: "budget", "force_stop", or None (it was cut short)."""
    if frames >= max_frames:
        return BUDGET
    if force_stop is not None and frames >= force_stop:
        return FORCE_STOP
    return None


def _ran_to(cap: str, frames: int, p_stop: list[float]) -> Derived:
    return Derived(frames, None, list(p_stop[:frames]), cap)


def recut_limit(p_stop: list[float], frames: int, stop_fired: bool, max_frames: int,
                force_stop: int | None = None) -> float | None:
    """Thresholds below this one can be derived from the run; None: every threshold can.

    A run whose stop fired at step j tells where any threshold below p_stop[j] stops (at j or
    earlier); at p_stop[j] or above it would have run on, past what was generated. A run that used
    its whole frame budget, or was force-stopped, tells every threshold. A run stopped short (by the
    user) tells only the thresholds that some generated step exceeds."""
    if stop_fired:
        return float(p_stop[frames])
    if _cap(frames, max_frames, force_stop) is not None:
        return None
    return max((float(p) for p in p_stop[1:frames]), default=0.0)


def derive(p_stop: list[float], frames: int, source_threshold: float, threshold: float, max_frames: int,
           force_stop: int | None = None) -> Derived:
    """The utterance a run at `threshold` gives, from a run at `source_threshold` >= threshold.

    p_stop / frames are the source run's (frames committed; p_stop has frames entries, plus the
    stop step when its stop fired). The source must have run with the same max_frames and force
    stop (`force_stop`: the frame count it was force-stopped at, None when off).
    """
    if threshold > source_threshold:
        raise ValueError(f"threshold {threshold} is above the source run's {source_threshold}: "
                         "a higher threshold can run past where the source stopped")
    if not (len(p_stop) == frames or len(p_stop) == frames + 1) or frames < 1:
        raise ValueError(f"a trace of {len(p_stop)} steps cannot hold {frames} committed frames")
    j = stop_step(p_stop, threshold)
    if j is not None:
        return Derived(j, j, list(p_stop[: j + 1]))
    if len(p_stop) == frames + 1:  # the source's own stop step must have fired here too
        raise ValueError("the source stopped but no step is above the lower threshold: not a source run")
    cap = _cap(frames, max_frames, force_stop)
    if cap is None or frames > max_frames:
        end = f"its budget ({max_frames})" + ("" if force_stop is None else f" or its force stop ({force_stop})")
        raise ValueError(f"the source neither stopped nor reached {end}: {frames} frames")
    return _ran_to(cap, frames, p_stop)


def recut(p_stop: list[float], frames: int, stop_fired: bool, max_frames: int, threshold: float,
          force_stop: int | None = None) -> Derived:
    """derive() for any run the page keeps (stopped by its head, its budget, its force stop or the
    user): ValueError naming the limit when `threshold` needs frames the run did not make."""
    limit = recut_limit(p_stop, frames, stop_fired, max_frames, force_stop)
    if limit is not None and threshold >= limit:
        raise ValueError(f"stop_threshold {threshold:g} needs the take to have run on: a re-cut reaches "
                         f"thresholds below {limit:.3f}; generate at {threshold:g} instead")
    j = stop_step(p_stop[: frames + 1] if stop_fired else p_stop[:frames], threshold)
    if j is not None:
        return Derived(j, j, list(p_stop[: j + 1]))
    # Ran to its end: the budget, the force stop, or (a user's Stop) as far as it got.
    return _ran_to(_cap(frames, max_frames, force_stop) or BUDGET, frames, p_stop)
