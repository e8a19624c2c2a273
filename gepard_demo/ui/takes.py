"""A visitor's takes: every Generate kept with what made it, to replay, compare and re-cut.

A take holds its text, the controls as they were (the seed the run used, not "random"), the
settings, the stats, p_stop, the committed frames' codes (for a re-cut) and its WAV. The list
lives in the visitor's Gradio session state (nothing global): newest first, MAX_TAKES of them.

Re-cut: a seeded take's frames are the same for every threshold up to where it stops, so the
take at a lower threshold is a prefix of its frames (model/guards/stop_rule.py, the rule eval's one-pass
sweep applies); the prefix is decoded as the session would have streamed it (same decoder mode,
same chunk cuts) and shaped with the same end fade and silence. A long text's take is re-cut
segment by segment: each segment is a request of its own (its own seed, its own stop), so each
is cut where its own p_stop says, and the cut segments are decoded as one stream, as the session
streamed them.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gepard_demo.model.guards.ending import STOP, utterance_end
from gepard_demo.model.guards.guardrails import force_stop_for
from gepard_demo.model.guards.stop_rule import Derived, recut, recut_limit
from gepard_demo.declare import declared, may_be_unset, page_controls, tagged, takes_a_word, values_of
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.settings_flags import setting_args
from gepard_demo.streaming.playback import decode_frames
from gepard_demo.streaming.text_feed import write
from gepard_demo.streaming.text_input import split_text

from gepard_demo.ui.page.controls import parse_feed

if TYPE_CHECKING:
    from gepard_demo.model.seams import AudioCodec
    from gepard_demo.units import Json
    from gepard_demo.zerogpu.resident import Resident

MAX_TAKES = 10


def _list(value: Json) -> list:
    """A stats list (SynthesisStats.as_dict's), [] where absent."""
    return list(value) if isinstance(value, (list, tuple)) else []


def _number(value: Json) -> float:
    """A stats number, 0 where absent (a count, seconds)."""
    return float(value) if isinstance(value, (int, float)) else 0.0


@dataclass(frozen=True, eq=False)  # identity: Gradio hashes State values to see them change
class Take:
    number: int
    text: str
    controls: dict[str, Json]  # control name -> value, as "use these settings" puts them back
    sampling: SamplingSettings  # with the seed used
    stream: StreamSettings
    stats: dict[str, Json]  # SynthesisStats.as_dict()
    codes: np.ndarray | None = field(default=None, repr=False)  # (frames, 32) int16; None: not kept (served)
    wav: str | None = None
    model: str = ""
    made_at: float = field(default_factory=time.time)
    job_id: str = ""  # the Generate's: its words (ui/captions.py) give the take's SRT and VTT
    spoken: str = ""  # what the model read (the text front end's reading); "": as written

    @property
    def p_stop(self) -> list[float]:
        return _list(self.stats.get("p_stop"))

    @property
    def entropy(self) -> list[float]:
        return _list(self.stats.get("entropy"))

    @property
    def stop_frame(self) -> int | None:
        """The frame its stop fired at; None where it did not."""
        frame = self.stats.get("stop_frame")
        return int(frame) if self.stats.get("stop_fired") and isinstance(frame, (int, float)) else None

    @property
    def label(self) -> str:
        return " · ".join([f"#{self.number}", *tagged(self.sampling), f"{self.stats.get('audio_s', 0):.1f} s"])

    def ended(self) -> str:
        st = self.stats
        if st.get("cancelled"):
            return "stopped"
        if st.get("stop_fired"):
            return f"stop at {st.get('stop_frame')}"
        if st.get("force_stopped"):
            return f"force stop at {st.get('frames')}"
        return "budget" if st.get("runaway") else "–"

    @property
    def force_stop(self) -> int | None:
        """The frame count this take was force-stopped at ("auto" scaled to its text), or None."""
        return force_stop_for(self.sampling, self.text)

    def texts(self) -> list[str]:
        """Its text's segments as the session made them: a long text's, or, written as it came,
        the sentences (text_feed.py)."""
        rate = parse_feed(self.controls).rate
        return list(write(self.text, rate).units) if rate is not None else split_text(self.text)

    def segments(self) -> list[tuple[str, list[float], int, bool]]:
        """Per text segment: its text, its p_stop steps, its frames, whether its stop fired."""
        texts, st = self.texts(), self.stats
        frames, ends = [int(n) for n in _list(st.get("segment_frames"))], _list(st.get("ended_by"))
        if len(texts) == 1 and not frames:  # a take from before segments were counted
            return [(self.text, self.p_stop, int(_number(st["frames"])), bool(st["stop_fired"]))]
        out, step = [], 0
        for text, n, end in zip(texts, frames, ends):
            steps = n + (1 if end == STOP else 0)
            out.append((text, self.p_stop[step:step + steps], n, end == STOP))
            step += steps
        return out

    def recut_limit(self) -> float | None:
        """Thresholds below this re-cut (every segment's reach); None: all do."""
        limits = [recut_limit(p, n, fired, self.sampling.max_frames, force_stop_for(self.sampling, text))
                  for text, p, n, fired in self.segments()]
        known = [x for x in limits if x is not None]
        return min(known) if known else None

    def recut_parts(self, threshold: float) -> tuple[Derived, list[int]]:
        """Where this take stops at `threshold` (stop_rule.recut, segment by segment), and how many
        frames each segment keeps; ValueError beyond its reach."""
        why = self.recut_refusal()
        if why:
            raise ValueError(f"no re-cut: {why}")
        parts = [recut(p, n, fired, self.sampling.max_frames, threshold, force_stop_for(self.sampling, text))
                 for text, p, n, fired in self.segments()]
        if len(parts) == 1:
            return parts[0], [parts[0].frames]
        frames, end = sum(d.frames for d in parts), utterance_end([d.ended_by for d in parts])
        total = Derived(frames, frames if end == STOP else None, [p for d in parts for p in d.p_stop], end)
        return total, [d.frames for d in parts]

    def recut_at(self, threshold: float) -> Derived:
        return self.recut_parts(threshold)[0]

    def recut_refusal(self) -> str | None:
        """Why this take cannot be re-cut at all, or None."""
        if self.codes is None:
            return "this take's frames were not kept (a served model sends audio only)"
        if not self.stats.get("frames"):
            return "this take has no frames"
        segments = int(_number(self.stats.get("segments", 1)))
        if segments > 1 and len(_list(self.stats.get("segment_frames"))) != segments:
            return "this long text was stopped before its last segment: there is no whole take to re-cut"
        return None


def add_take(takes: list[Take] | None, take: Take) -> list[Take]:
    return ([take] + list(takes or []))[:MAX_TAKES]


def next_number(takes: list[Take] | None) -> int:
    return 1 + max((t.number for t in takes or []), default=0)


def find(takes: list[Take] | None, label: str | None) -> Take | None:
    for t in takes or []:
        if label and (t.label == label or label.startswith(f"#{t.number} ")):
            return t
    return None


# A take's row shows every sampling setting the page has a control for (declared in settings.py),
# headed by its control's short label, so a new one gets its column without an edit here, then
# what the take did.
_CONTROLS = page_controls(SamplingSettings)
SHOWN_SETTINGS = tuple(_CONTROLS)
TABLE_HEADERS = ["take", "text", *(c.short for c in _CONTROLS.values()),
                 "frames", "ended", "audio s", "RTF", "TTFA ms", "entropy drop"]
# Each column at least as wide as its header's longest word (and a short value, "budget"), so the
# browser wraps a header between words, never inside one; wider than the page, the table scrolls.
# The table's font is monospace: CHAR_PX is a bold character's width there, with room to spare.
CHAR_PX, CELL_PAD_PX, TEXT_PX = 10, 32, 240


def header_widths(headers: list[str], wide: tuple[str, ...] = ("text",)) -> list[str | int]:
    """A gr.Dataframe's column_widths (px) that keep each header's words whole; `wide` columns hold
    sentences. The takes table's, and the Eval tab's tables'."""
    return [TEXT_PX if h in wide else CHAR_PX * max(6, *map(len, h.split())) + CELL_PAD_PX for h in headers]


TABLE_WIDTHS = header_widths(TABLE_HEADERS)


def table_rows(takes: list[Take] | None) -> list[list[Json]]:
    rows = []
    for t in takes or []:
        st = t.stats
        text = t.text if not t.spoken or t.spoken == t.text else f"{t.text} → {t.spoken}"  # both, as written first
        text = text if len(text) <= 48 else text[:47] + "…"
        values = values_of(t.sampling, SHOWN_SETTINGS)
        rows.append([t.number, text, *(_cell(name, v) for name, v in values.items()), st.get("frames"), t.ended(),
                     round(_number(st.get("audio_s")), 2), _round(st.get("rtf"), 3),
                     _round(_number(st["ttfa_s"]) * 1000 if st.get("ttfa_s") is not None else None, 0),
                     _round(st.get("entropy_drop"), 3)])
    return rows


# Columns whose values may be a word or unset are text throughout (one type per column), each as
# its flag writes it.
_TEXT_COLUMNS = {n for n in SHOWN_SETTINGS if may_be_unset(SamplingSettings, n) or takes_a_word(SamplingSettings, n)}
_WRITERS = declared(SamplingSettings)


def _cell(name: str, value: Json) -> Json:
    """A setting as the table shows it: a number as is; in a text column as its flag writes it
    ("off", "auto"), or as text (the seed: a browser's numbers would round one past 2**53)."""
    if name not in _TEXT_COLUMNS:
        return value
    text = _WRITERS.get(name)
    shown = text.write(value) if text is not None else None  # None: no flag (unset)
    return shown if shown is not None else _show(value)


def _round(x, digits):
    return None if x is None else round(float(x), digits)


def synth_command(take: Take) -> str:
    """The `python -m gepard_demo synth` line that makes this take again (same seed, same settings)."""
    s, st = take.sampling, take.stream
    args = ["python", "-m", "gepard_demo", "synth", take.text]
    if take.model:
        args += ["--model", take.model]
    args += ["--seed", str(s.seed), *setting_args(s, st, parse_feed(take.controls))]
    if take.controls.get("ref_audio"):  # the clip downloads beside the JSON while the server has it
        args += ["--ref-audio", Path(str(take.controls["ref_audio"])).name]
    args += ["-o", f"take-{take.number}.wav"]
    return shlex.join(args)


def settings_json(take: Take) -> str:
    traces = ("p_stop", "entropy", "nll")
    stats = {k: v for k, v in take.stats.items() if k not in traces}
    doc = {"take": take.number, "text": take.text, "model": take.model, "seed": take.sampling.seed,
           "sampling": asdict(take.sampling), "stream": asdict(take.stream),
           "reference_voice": bool(take.controls.get("ref_audio")), "synth": synth_command(take),
           "stats": stats, **{k: _list(take.stats.get(k)) for k in traces}}
    return json.dumps(doc, indent=2, default=str)


def diff_markdown(a: Take, b: Take) -> str:
    """A and B side by side: every setting and stat that differs is marked, numbers with B − A."""
    def row(name, x, y):
        mark = "" if x == y else " ◀"
        delta = ""
        numeric = isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool)
        if numeric and x != y and name != "seed":  # a seed's difference means nothing
            delta = f"{y - x:+.3g}"
        return f"| {name}{mark} | {_show(x)} | {_show(y)} | {delta} |"

    sa, sb, ta, tb = asdict(a.sampling), asdict(b.sampling), asdict(a.stream), asdict(b.stream)
    lines = [f"| | A: take #{a.number} | B: take #{b.number} | B − A |", "| --- | --- | --- | --- |",
             row("text", a.text[:60], b.text[:60])]
    lines += [row(k, sa[k], sb[k]) for k in sa]
    lines += [row(k, ta[k], tb[k]) for k in ta]
    for k in ("frames", "stop_frame", "audio_s", "speech_s", "ttfa_s", "rtf", "gen_time_s", "decode_time_s",
              "entropy_onset", "entropy_settled", "entropy_drop"):
        lines.append(row(k, _stat(a.stats.get(k)), _stat(b.stats.get(k))))
    lines.append(row("ended", a.ended(), b.ended()))
    lines.append(row("max p_stop", _stat(max(a.p_stop[1:], default=None)), _stat(max(b.p_stop[1:], default=None))))
    return "\n".join(lines)


def _stat(x):
    return round(float(x), 3) if isinstance(x, float) else x


def _show(x) -> str:
    if x is None:
        return "–"
    return str(x).replace("|", "\\|")


def recut_take(take: Take, threshold: float, codec: AudioCodec) -> tuple[np.ndarray, Derived]:
    """The take's audio at another threshold, from its own frames. ValueError (naming
    the stop threshold, with the reach) when the threshold needs frames the take did not make."""
    derived, kept = take.recut_parts(threshold)
    if take.codes is None:  # recut_parts refused it first (recut_refusal)
        raise ValueError("no re-cut: this take's frames were not kept")
    starts = np.cumsum([0] + [n for _, _, n, _ in take.segments()])
    codes = np.concatenate([take.codes[a:a + k] for a, k in zip(starts, kept)])
    # Each segment's break after it, where its kept frames now end: the same silence, exact.
    paused = take.stats.get("segment_pauses")
    pauses = dict(zip(np.cumsum(kept).tolist(), [int(p) for p in paused] if isinstance(paused, list) else []))
    return decode_frames(codec, codes, take.stream, pauses), derived


def recut_resident(resident: Resident, take: Take, threshold: float) -> tuple[np.ndarray, Derived]:
    """recut_take inside a GPU call (gepard_demo/zerogpu: module-level, pickled by name)."""
    return recut_take(take, threshold, resident.codec)
