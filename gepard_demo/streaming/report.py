"""A finished run as every surface reports it: the one writer of a session's outcome.

The server's X-Gepard headers, its SSE `speech.audio.done` event and `synth`'s JSON line all
write `run_report(stats)`; a client (the page in front of a server, eval's served engine) reads
it back with `serving.client.ServedEnd`. How the run ended is `ended_by` (model/guards/ending.py); the flags beside
it are derived from it, never set apart. Figures are rounded one way (units.wire_float).
"""

from __future__ import annotations

from gepard_demo.units import Json, wire_trace

from .chunks import SynthesisStats

# The report's fields that the non-streaming response also carries as X-Gepard-* headers (the
# traces are too long for a header).
HEADER_FIELDS = ("frames", "stop_fired", "runaway", "ended_by", "force_stopped")
# The report's per-frame traces (one number a frame: thousands on a long text); `synth` writes them
# to a file of their own (--traces) and keeps the rest on its one line.
PER_FRAME = ("entropy", "nll")


def run_report(st: SynthesisStats) -> dict[str, Json]:
    """frames, how it ended (ended_by, and stop_fired / runaway / force_stopped from it), where the
    stop fired, the seed, the segments, the onset-entropy probe summary and its traces."""
    return {
        "frames": st.frames, "ended_by": st.outcome, "stop_fired": st.stop_fired, "runaway": st.runaway,
        "force_stopped": st.force_stopped, "stop_frame": st.stop_frame, "seed": st.seed,
        "segments": st.segments, "segment_frames": list(st.segment_frames), **st.probe(),
        "entropy": wire_trace(st.entropy), "nll": wire_trace(st.nll),
    }


def report_headers(report: dict[str, Json]) -> dict[str, str]:
    """HEADER_FIELDS and the probe's summary as X-Gepard-* headers: X-Gepard-Ended-By: budget,
    X-Gepard-Stop-Fired: false, X-Gepard-Entropy-Drop: 0.3121 (empty where unknown)."""
    names = [*HEADER_FIELDS, *(k for k in report if k.startswith("entropy_"))]
    return {"X-Gepard-" + k.replace("_", "-").title(): _header_value(report[k]) for k in names}


def _header_value(v: Json) -> str:
    if v is None:
        return ""
    return str(v).lower() if isinstance(v, bool) else str(v)
