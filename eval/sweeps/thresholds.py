"""One-pass stop-threshold sweep: every threshold's utterance from one generation.

For a fixed text, seed and every other sampling setting, the trajectory does not depend on
the stop threshold until the stop fires (the threshold only decides whether a step commits;
the noise and the fed-back frames are the same). So every lower threshold's utterance is a
prefix of the highest threshold's run. The engine's stop semantics (gepard_demo.model.generation):
step 0 always commits; at step j >= 1 the stop fires when p_stop[j] > threshold and commits
nothing; the step that commits frame number max_frames ends a runaway ("budget").

`derive` applies exactly that rule to a recorded p_stop trace. A run at the highest threshold
that hit the budget is still an exact source: a lower threshold either stops at some step
j < max_frames (the prefix) or runs away too (the whole run), since the budget is the same.

The force stop (force_stop_frames) is the same kind of end: it does not depend on the threshold
(stop_rule.derive takes the source's own force stop), and it only truncates (the frames up to it
are those of a run without it). So points that differ in force_stop_frames as well share one
source: generated with the largest cap the group needs (off when any point is off; "auto"
resolved per text, `source_cap`), and each point's utterance is the source's derived one cut at
its own cap (`capped`): a stop at step j survives for j < cap, else the run is force-stopped at
cap frames. The repetition penalty, by contrast, changes the frames themselves: its values are
separate groups, each with its own source. The probe's traces (entropy per step, NLL per frame)
are cut with the frames.

`one_pass_points` fills one ordinary run folder per threshold (same layout as eval.runs.run, so
scoring, reports and compare work unchanged) from one generation per utterance:
  traces/<key>.npz   the source run of one (text, seed, sampling-but-threshold): codes, p_stop,
                     timing; reused on resume and by any threshold up to its source threshold
  <point>/rows.jsonl rows carry "one_pass": source threshold and trace key
Every distinct prefix is decoded once per batch (points whose prefixes end on the same frame
share the decode); `CachedTranscriber` (eval/scoring/transcript_cache.py) transcribes each
distinct audio once across all points (keyed by the SHA-256 of the audio as read back from its
WAV).

Timing of derived rows: gen_s = the source's first-frame time + the source's mean step time x
(steps - 1) (an estimate; one generation serves several points), ttfa_s as eval.engines.local
defines it for the local engine on that estimate.
Bit-for-bit equality with a direct run holds for solo generation (batch size 1); in a batch
the rows of a brute-force run finish at other steps, so batch shapes and with them the last
bits of the logits can differ (facts §3), exactly as between any two batch layouts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np
import torch
from tqdm import tqdm

from eval.jsonio import append_jsonl, write_bytes_atomic, write_json_atomic
from eval.runs.run import (
    RunConfig,
    RunError,
    done_rows,
    error_rows,
    make_row,
    note_session,
    pending_items,
    prepare_folder,
    save_audio,
)
from eval.runs.seeds import sample_seed
from eval.runs.sets import Utterance, expand_samples
from gepard_demo.declare import values_of
from gepard_demo.model.guards.ending import BUDGET, FORCE_STOP
from gepard_demo.model.guards.guardrails import force_stop_for
# the rule, shared with the page's re-cut (Derived is re-exported for callers of derive)
from gepard_demo.model.guards.stop_rule import CUT_ONLY, Derived, at_threshold, derive, threshold_of  # noqa: F401
from gepard_demo.settings import SamplingSettings


def trace_key(text: str, seed: int, sampling: SamplingSettings) -> str:
    """What a source run depends on: text, seed and every sampling setting but the threshold."""
    s = asdict(at_threshold(sampling, 0.5).replace(seed=seed))
    return hashlib.sha256(json.dumps([text, s], sort_keys=True).encode()).hexdigest()[:24]


@dataclass
class Trace:
    codes: torch.Tensor  # (T, 32) long
    p_stop: list[float]
    source_threshold: float
    gen_time_s: float
    first_frame_s: float
    seed: int
    force_stop: int | None = None  # the source's own force stop (resolved), None: off
    entropy: list[float] | None = None  # the probe's, one per step (as p_stop); None in traces from before it
    nll: list[float] | None = None

    @property
    def frames(self) -> int:
        return int(self.codes.shape[0])


class _Probe(TypedDict, total=False):
    """A trace file's probe arrays: both, or neither (a trace recorded without the probe)."""

    entropy: np.ndarray
    nll: np.ndarray


def save_trace(path: Path, t: Trace) -> None:
    meta = {"source_threshold": t.source_threshold, "gen_time_s": t.gen_time_s,
            "first_frame_s": t.first_frame_s, "seed": t.seed, "force_stop": t.force_stop}
    import io

    buf = io.BytesIO()
    probe: _Probe = {} if t.entropy is None else {"entropy": np.asarray(t.entropy, np.float64), "nll": np.asarray(t.nll, np.float64)}
    np.savez(buf, codes=t.codes.numpy().astype(np.int16), p_stop=np.asarray(t.p_stop, np.float64),
             meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **probe)
    write_bytes_atomic(path, buf.getvalue())


def load_trace(path: Path) -> Trace:
    with np.load(path) as z:
        meta = json.loads(z["meta"].tobytes().decode())
        probe = ([float(v) for v in z["entropy"]], [float(v) for v in z["nll"]]) if "entropy" in z else (None, None)
        return Trace(torch.from_numpy(z["codes"].astype(np.int64)), [float(p) for p in z["p_stop"]],
                     meta["source_threshold"], meta["gen_time_s"], meta["first_frame_s"], meta["seed"],
                     meta.get("force_stop"), *probe)


def derived_result(trace: Trace, d: Derived, text: str, settings: SamplingSettings):
    """A GenerationResult for the derived utterance (timing estimated from the source)."""
    from gepard_demo.model.generation import GenerationResult

    steps_src = max(len(trace.p_stop) - 1, 1)
    step_s = (trace.gen_time_s - trace.first_frame_s) / steps_src
    return GenerationResult(
        text=text, frames=trace.codes[: d.frames], p_stop=d.p_stop,
        stop_frame=d.stop_frame, ended_by=d.ended_by, seed=trace.seed, prompt_tokens=0,
        gen_time_s=trace.first_frame_s + step_s * (len(d.p_stop) - 1), first_frame_s=trace.first_frame_s,
        settings=settings)


class TraceStore:
    """Source runs on disk, generated on demand at the highest threshold asked for."""

    def __init__(self, folder: str | Path, local, lock=None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.local = local  # eval.engines.GepardLocal
        self.lock = lock  # held while generating (the app's engine lock), or None
        self.generated = 0  # source runs generated by this process (the benchmark reads it)

    def get(self, requests: list[tuple[str, int]], sampling: SamplingSettings, source_threshold: float,
            caps: list[int | None] | None = None) -> list[Trace]:
        """caps: per request, the source's force stop (resolved per text; None: off); default: the
        sampling's own force_stop_frames, resolved."""
        caps = caps if caps is not None else [force_stop_for(sampling, text) for text, _ in requests]
        settings = [sampling.replace(force_stop_frames=cap) for cap in caps]
        keys = [trace_key(text, seed, s) for (text, seed), s in zip(requests, settings)]
        found: dict[int, Trace] = {}
        for i, k in enumerate(keys):
            p = self.folder / f"{k}.npz"
            if p.is_file():
                t = load_trace(p)
                if t.source_threshold >= source_threshold:
                    found[i] = t
        todo = [i for i in range(len(requests)) if i not in found]
        if todo:
            with self.lock or contextlib.nullcontext():
                results = self.local.engine.generate(
                    [requests[i][0] for i in todo],
                    [at_threshold(settings[i], source_threshold).replace(seed=requests[i][1]) for i in todo])
            for i, r in zip(todo, results):
                t = Trace(r.frames, [float(p) for p in r.p_stop], source_threshold, r.gen_time_s,
                          r.first_frame_s, r.seed, caps[i], [float(h) for h in r.entropy], [float(x) for x in r.nll])
                save_trace(self.folder / f"{keys[i]}.npz", t)
                found[i] = t
            self.generated += len(todo)
        return [found[i] for i in range(len(requests))]


def source_cap(samplings: list[SamplingSettings], text: str) -> int | None:
    """The force stop a source run needs to serve every one of these points for `text`: off when
    any point is off (a force stop only truncates: the frames are the same up to it, so a longer
    run tells every shorter cap), else the largest cap among them ("auto" resolved per text; a
    point "auto" cannot apply to is left out: it goes to errors.jsonl)."""
    caps: list[int] = []
    off = False
    for s in samplings:
        try:
            cap = force_stop_for(s, text)
        except ValueError:
            continue
        if cap is None:
            off = True
        else:
            caps.append(min(cap, s.max_frames))  # past the budget a cap changes nothing
    return None if not caps or off else max(caps)


def capped(d: Derived, force_stop: int | None, max_frames: int) -> Derived:
    """A point's utterance from the derived one of a source with a later (or no) force stop: the
    force stop comes after the step that commits its force_stop-th frame, so a stop at step j
    survives only for j < force_stop; otherwise the run ends there with force_stop frames, reported
    as the budget where both fall on the same frame (the engine's order)."""
    if force_stop is None or d.frames < force_stop:
        return d
    end = BUDGET if force_stop >= max_frames else FORCE_STOP
    return Derived(force_stop, None, list(d.p_stop[:force_stop]), end)


@contextlib.contextmanager
def _locked(dirs: list[Path]):
    held = []
    try:
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True)
            f = open(d / ".lock", "w")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                raise RunError(f"{d} is being written by another process") from None
            held.append(f)
        yield
    finally:
        for f in held:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()


def one_pass_points(points: list[tuple[RunConfig, Path]], store: TraceStore, progress=None, log=print) -> dict:
    """Fill the run folders of points that differ only in stop threshold from one generation.

    Returns counts: {"utterances", "decodes", "rows"} for this call.
    """
    if not points:
        return {"utterances": 0, "decodes": 0, "rows": 0}
    _check_points(points)
    base = points[0][0]
    source_threshold = max(threshold_of(cfg.sampling) for cfg, _ in points)
    dirs = [Path(d) for _, d in points]
    with _locked(dirs):
        items = [expand_samples(prepare_folder(cfg, d), cfg.seeds) for cfg, d in points]
        ids = [u.id for u in items[0]]
        if any([u.id for u in it] != ids for it in items):
            raise RunError("one-pass points must share one set")
        done = [{r["id"] for r in done_rows(d, repair=True)} | {r["id"] for r in error_rows(d)} for d in dirs]
        for (cfg, d), dn in zip(points, done):  # what a direct run refuses goes to errors.jsonl, as there
            pending_items(cfg, d, items[0], dn, log)
        pending = [u for u in items[0] if any(u.id not in dn for dn in done)]
        if pending:
            engine = {**store.local.describe(), "one_pass_source_threshold": source_threshold}
            for d, dn in zip(dirs, done):
                note_session(d, engine, len(dn))
        total, before = len(ids) * len(points), sum(len(dn) for dn in done)
        bar = tqdm(total=total, initial=before, desc=f"one-pass {dirs[0].parent.name}", unit="row")
        counts = {"utterances": len(pending), "decodes": 0, "rows": 0}

        def wrote() -> None:
            counts["rows"] += 1
            bar.update(1)
            if progress:
                progress(before + counts["rows"], total)

        for start in range(0, len(pending), base.batch_size):
            batch = pending[start : start + base.batch_size]
            seeds = [sample_seed(base.base_seed, u.sentence_id, u.sample) for u in batch]
            caps = [source_cap([cfg.sampling for (cfg, _), dn in zip(points, done) if u.id not in dn], u.text)
                    for u in batch]
            traces = store.get([(u.text, s) for u, s in zip(batch, seeds)], base.sampling, source_threshold, caps)
            for u, seed, tr in zip(batch, seeds, traces):
                counts["decodes"] += _derive_rows(u, seed, tr, points, done, store.local, wrote)
        bar.close()
        for d, dn in zip(dirs, done):
            write_json_atomic(d / "status.json", {"done": len(dn), "total": len(ids), "complete": len(dn) == len(ids)})
    return counts


def _check_points(points: list[tuple[RunConfig, Path]]) -> None:
    base = points[0][0]
    for cfg, _ in points:
        same = cfg.sampling.replace(**values_of(base.sampling, CUT_ONLY))
        if same != base.sampling or cfg.stream != base.stream or cfg.set != base.set or cfg.base_seed != base.base_seed \
                or cfg.limit != base.limit or cfg.categories != base.categories or cfg.batch_size != base.batch_size \
                or cfg.seeds != base.seeds:
            raise RunError("one-pass points must differ in stop threshold and force stop only")


def _derive_rows(u: Utterance, seed: int, tr: Trace, points: list[tuple[RunConfig, Path]], done: list[set[str]],
                 local, wrote) -> int:
    """One utterance's row in every point that lacks it, cut from its trace: each length decoded
    once. Returns the decodes made."""
    base = points[0][0]
    audio_by_frames: dict[int, tuple[np.ndarray, float]] = {}
    for (cfg, d), dn in zip(points, done):
        if u.id in dn:
            continue
        der = capped(derive(tr.p_stop, tr.frames, tr.source_threshold, threshold_of(cfg.sampling),
                            cfg.sampling.max_frames, force_stop=tr.force_stop),
                     force_stop_for(cfg.sampling, u.text), cfg.sampling.max_frames)
        if der.frames not in audio_by_frames:
            t0 = time.perf_counter()
            raw = local.codec.decode(tr.codes[: der.frames])
            audio_by_frames[der.frames] = (raw, time.perf_counter() - t0)
        syn = _synthesis(local, tr, der, u.text, cfg, *audio_by_frames[der.frames])
        save_audio(d, u, syn)
        row = make_row(u, syn, seed, cfg)
        row["one_pass"] = {"source_threshold": tr.source_threshold,
                           "trace": trace_key(u.text, seed, base.sampling.replace(force_stop_frames=tr.force_stop)),
                           "timing": "estimated from the source run's step rate"}
        append_jsonl(d / "rows.jsonl", row)
        dn.add(u.id)
        wrote()
    return len(audio_by_frames)


def _synthesis(local, tr: Trace, der: Derived, text: str, cfg: RunConfig, raw: np.ndarray, decode_s: float):
    from eval.engines.base import Synthesis
    from gepard_demo.codec import apply_end_of_speech

    r = derived_result(tr, der, text, cfg.sampling.replace(seed=tr.seed))
    steps = len(der.p_stop)
    t0 = time.perf_counter()
    audio = apply_end_of_speech(raw, local.codec.sample_rate, cfg.stream.fade_ms, cfg.stream.silence_ms)
    return Synthesis(
        audio=np.asarray(audio, np.float32), sample_rate=local.codec.sample_rate, frames=der.frames,
        stop_frame=der.stop_frame, p_stop=der.p_stop,
        seed=tr.seed, gen_s=r.gen_time_s, decode_s=decode_s + time.perf_counter() - t0,
        ttfa_s=local.ttfa_estimate(r, cfg.stream), codes=tr.codes[: der.frames].numpy().astype(np.int16),
        text_tokens=local.text_tokens(text), ended_by=der.ended_by,
        force_stop=force_stop_for(cfg.sampling, text), entropy=None if tr.entropy is None else tr.entropy[:steps],
        nll=None if tr.nll is None else tr.nll[: der.frames])
