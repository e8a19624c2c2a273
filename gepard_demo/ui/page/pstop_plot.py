"""The p_stop plot as inline SVG: drawn here, made interactive by pstop.js.

Beside p_stop (left axis, 0-1) each trace carries the onset-entropy probe's belief entropy
(gepard_demo/model/guards/probe.py) as a dashed line on its own right axis, in nats from 0 to at most
ENTROPY_AXIS (the mean over Gepard's 32 heads of ln(levels) is 1.90: a uniform belief). A clean
run's entropy drops within its first 50 frames; a derailed one stays flat and high (facts §15).

An SVG (not a matplotlib image) so that the page can answer a hover (the frame under the pointer:
its p_stop and time) and let the threshold line be dragged, and so that it can be redrawn every
poll while the utterance is made. The traces travel in the element's data attributes; page.js
reads them back for the hover and for "at this threshold the take would stop at frame N" (the
rule of gepard_demo/model/guards/stop_rule.py, in JS). Colours follow the page (currentColor), so the
dark theme needs no filter.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass

from gepard_demo.units import FRAME_RATE_HZ, wire_trace

W, H = 640, 220  # viewBox; the element scales to its column
LEFT, RIGHT, TOP, BOTTOM = 40, 40, 10, 28
ENTROPY_AXIS = 2.0  # nats at the right axis's top (raised if a trace goes higher)
COLORS = ("#1f77b4", "#ff7f0e")


@dataclass(frozen=True)
class Trace:
    label: str
    p_stop: tuple[float, ...]  # one per decode step, the stop step included
    stop_frame: int | None = None  # where its stop head fired
    entropy: tuple[float, ...] = ()  # the probe's belief entropy per step (nats); () where unknown


def _x(step: float, steps: int) -> float:
    return LEFT + (W - LEFT - RIGHT) * step / max(steps - 1, 1)


def _y(p: float) -> float:
    return TOP + (H - TOP - BOTTOM) * (1.0 - min(max(p, 0.0), 1.0))


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _entropy_top(traces: list[Trace]) -> float:
    return max([ENTROPY_AXIS] + [math.ceil(max(_finite(t.entropy), default=0.0) * 2) / 2 for t in traces])


def pstop_svg(traces: list[Trace], threshold: float, *, live: bool = False, movable: bool = True,
              plot_id: str = "main") -> str:
    """The plot's HTML. live: the utterance is still being made (the title says so)."""
    steps = max([len(t.p_stop) for t in traces] + [2])
    parts = [f'<svg viewBox="0 0 {W} {H}" width="100%" role="img" aria-label="p_stop per decode step" '
             f'class="gepard-pstop-svg" preserveAspectRatio="none" style="max-height:260px">']
    for p in (0.0, 0.25, 0.5, 0.75, 1.0):  # grid and y labels
        y = _y(p)
        parts.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" '
                     f'stroke-opacity="0.15"/><text x="{LEFT - 4}" y="{y + 4:.1f}" font-size="10" '
                     f'text-anchor="end" fill="currentColor">{p:g}</text>')
    top = _entropy_top(traces)
    has_entropy = any(_finite(t.entropy) for t in traces)
    if has_entropy:  # the right axis: entropy in nats
        for k in range(5):
            h = top * k / 4
            parts.append(f'<text x="{W - RIGHT + 4}" y="{_y(k / 4) + 4:.1f}" font-size="10" text-anchor="start" '
                         f'fill="currentColor" opacity="0.8">{h:.2g}</text>')
    for k in range(5):  # x labels: frames and seconds
        step = round((steps - 1) * k / 4)
        parts.append(f'<text x="{_x(step, steps):.1f}" y="{H - 10}" font-size="10" text-anchor="middle" '
                     f'fill="currentColor">{step} · {step / FRAME_RATE_HZ:.1f} s</text>')
    for i, t in enumerate(traces):
        color = COLORS[i % len(COLORS)]
        pts = " ".join(f"{_x(j, steps):.1f},{_y(p):.1f}" for j, p in enumerate(t.p_stop))
        if pts:
            parts.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="1.5" '
                         f'class="gepard-trace" data-label="{html.escape(t.label)}"/>')
        h_pts = " ".join(f"{_x(j, steps):.1f},{_y(h / top):.1f}" for j, h in enumerate(t.entropy)
                         if h is not None and math.isfinite(h))
        if h_pts:
            parts.append(f'<polyline points="{h_pts}" fill="none" stroke="{color}" stroke-width="1.2" '
                         f'stroke-dasharray="4 2" stroke-opacity="0.75" class="gepard-entropy" '
                         f'data-label="{html.escape(t.label)}"/>')
        if t.stop_frame is not None:
            x = _x(t.stop_frame, steps)
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{H - BOTTOM}" stroke="{color}" '
                         f'stroke-dasharray="2 3" class="gepard-stop-mark"/>')
    y = _y(threshold)
    # The threshold line: a wide transparent band to grab, the visible line inside it.
    parts.append(f'<g class="gepard-threshold" data-threshold="{threshold:g}" style="cursor:{"ns-resize" if movable else "default"}">'
                 f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="transparent" stroke-width="12"/>'
                 f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#d62728" stroke-dasharray="5 3"/></g>')
    parts.append(f'<line class="gepard-cursor" x1="0" x2="0" y1="{TOP}" y2="{H - BOTTOM}" stroke="currentColor" '
                 f'stroke-opacity="0.4" visibility="hidden"/></svg>')
    legend = " · ".join(f'<span style="color:{COLORS[i % len(COLORS)]}">━ {html.escape(t.label)}</span>'
                        for i, t in enumerate(traces))
    data = {"traces": [{"label": t.label, "p": [round(float(p), 5) for p in t.p_stop], "stop": t.stop_frame,
                        "h": wire_trace(t.entropy)}
                       for t in traces], "threshold": threshold, "frameRate": FRAME_RATE_HZ, "steps": steps,
            "box": [LEFT, RIGHT, TOP, BOTTOM, W, H], "movable": movable}
    title = "p_stop per step" + (" · belief entropy (dashed, nats, right axis)" if has_entropy else "") + \
        (" (live: filling as frames are made)" if live else "")
    return (f'<div class="gepard-pstop" data-plot="{plot_id}" data-live="{int(live)}" '
            f"data-pstop='{html.escape(json.dumps(data), quote=True)}'>"
            f'<div class="gepard-pstop-title">{title} · <span style="color:#d62728">┅ threshold '
            f'<b class="gepard-threshold-value">{threshold:g}</b></span> {legend}</div>'
            f'{"".join(parts)}<div class="gepard-pstop-readout" aria-live="polite">Hover a frame for its p_stop'
            f'{"; drag the red line to see where another threshold stops" if movable else ""}.</div></div>')
