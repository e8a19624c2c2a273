"""Grid sweep over the default axes (grid.DEFAULT_AXES) x any other sampling setting, resumable.

Every grid point is an ordinary run folder, <out>/T0.3_S0.5[_{axis}{value}...]/ (grid.point_name)
(scored and reported when an ASR is given). Extra axes are any other SamplingSettings field
(e.g. a CFG scale axis, `--axis cfg-scale=1,2`): each becomes a value in the point's sampling, a part of
its folder name and a column of sweep.csv.

With the local engine (default) the points that differ only in stop threshold are made from
one generation per utterance at the highest threshold (eval.sweeps.thresholds: prefixes, exact
under the engine's stop rule); `one_pass=False` (or --brute-force) runs every point on its
own, as the local-stream engine always does. Transcripts are cached by audio hash across
points (<out>/asr_cache/<tag>.jsonl), so an audio that several points share is transcribed
once. <out>/sweep.csv has one line per point; <out>/sweep.json records the grid and what the
sweep cost; charts come from eval.sweeps.heatmaps.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pandas as pd

from eval.jsonio import replace_atomic, write_json_atomic
from eval.runs.run import RunError, run
from eval.sweeps.grid import SweepConfig, point_name
from gepard_demo.model.guards.stop_rule import CUT_ONLY


def _groups(points: list[dict], one_pass: bool = True) -> list[list[dict]]:
    """Points one generation can serve (eval/sweeps/thresholds.py), in grid order: those that differ
    only in stop threshold and force stop (one_pass), else only in stop threshold."""
    free = CUT_ONLY if one_pass else CUT_ONLY[:1]
    groups: dict[tuple, list[dict]] = {}
    for p in points:
        groups.setdefault(tuple((k, v) for k, v in p.items() if k not in free), []).append(p)
    return list(groups.values())


def sweep(cfg: SweepConfig, out: str | Path, asr=None, engine=None, transcriber=None, cache=None, log=print,
          progress=None, dnsmos: str = "on", derail=None) -> Path:
    """Run (and score, when asr is an ASRSettings) every grid point; returns <out>/sweep.csv.

    engine: an eval engine (GepardLocal for one-pass); loaded from cfg.base when None.
    progress: optional callable(fraction, description) (the Eval tab).
    """
    from eval.scoring.derail import DerailRule

    derail = derail or DerailRule()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    points = cfg.points()
    _check_resume(out / "sweep.json", cfg)
    say = progress or (lambda frac, desc: None)
    if engine is None:
        from eval.engines import load_engine

        engine = load_engine(cfg.base.engine, cfg.base.model, cfg.base.device, cfg.base.model_cache)
    started = time.perf_counter()
    synth_share = 0.7 if asr is not None else 0.95  # of the progress bar
    stats = _synthesize(cfg, out, points, engine, lambda f, d: say(synth_share * f, d), log)
    stats["synthesis_s"] = time.perf_counter() - started
    tag = None
    if asr is not None:
        tag, stats["asr_transcribed"], stats["asr_cache_hits"] = _score(
            out, points, asr, transcriber, cache, dnsmos, lambda f, d: say(synth_share + (0.95 - synth_share) * f, d),
            log)
    stats["asr_s"] = time.perf_counter() - started - stats["synthesis_s"]
    say(0.96, "reports and charts")
    _summarize(out, points, tag, derail)
    stats["wall_s"] = time.perf_counter() - started
    write_json_atomic(out / "sweep.json", {"config": cfg.to_json(), "asr": tag, "last_call": stats,
                                           "derail_rule": derail.as_dict(),
                                           "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    from eval.sweeps.heatmaps import sweep_charts

    sweep_charts(out, log=log, derail=derail)
    say(1.0, "done")
    return out / "sweep.csv"


def _check_resume(saved: Path, cfg: SweepConfig) -> None:
    """A sweep folder resumes only with the base settings it was made with."""
    if not saved.is_file():
        return
    old = json.loads(saved.read_text()).get("config", {})
    if old.get("base") and {k: v for k, v in old["base"].items() if k != "model_cache"} != \
            {k: v for k, v in cfg.base.to_json().items() if k != "model_cache"}:
        raise RunError(f"{saved.parent} holds a sweep with other base settings; resume with the same ones or pick a "
                       "new --out")


def _synthesize(cfg: SweepConfig, out: Path, points: list[dict], engine, say, log) -> dict:
    """Every point's run folder, group by group; say(fraction, line) reports progress. Returns
    the call's counts (points, one_pass, sources_generated, decodes, rows)."""
    # A reference voice goes through the engine's batch path (eval.runs.run), not the one-pass traces.
    source = engine.trace_source() if cfg.one_pass and cfg.base.ref_audio is None else None
    one_pass = source is not None
    stats = {"points": len(points), "one_pass": one_pass, "sources_generated": 0, "decodes": 0, "rows": 0}
    if source is not None:  # one_pass
        from eval.sweeps.thresholds import TraceStore, one_pass_points

        store = TraceStore(out / "traces", *source)
    groups = _groups(points, one_pass)
    first = 0  # the group's first point, counted from 1 in what is said
    for gi, group in enumerate(groups):
        cfgs = [(dataclasses.replace(cfg.base, sampling=cfg.base.sampling.replace(**p)), out / point_name(p)) for p in group]
        which = f"point {first + 1}" if len(group) == 1 else f"points {first + 1}-{first + len(group)}"

        def sub(done, total, at=first, which=which):
            say((at + len(cfgs) * done / max(total, 1)) / len(points),
                f"synthesis: {which} of {len(points)}, {done}/{total} rows")

        if one_pass:
            log(f"sweep one-pass: {', '.join(d.name for _, d in cfgs)} from one generation at the highest threshold")
            counts = one_pass_points(cfgs, store, progress=sub, log=log)
            stats["decodes"] += counts["decodes"]
            stats["rows"] += counts["rows"]
        else:
            for k, (c, d) in enumerate(cfgs):
                log(f"sweep point {first + k + 1} of {len(points)}: {d.name}")
                run(c, d, engine=engine, log=log, progress=lambda done, total, k=first + k, name=d.name: say(
                    (k + done / max(total, 1)) / len(points), f"synthesis: point {k + 1} of {len(points)} ({name})"))
        first += len(group)
    if one_pass:
        stats["sources_generated"] = store.generated
    return stats


def _score(out: Path, points: list[dict], asr, transcriber, cache, dnsmos: str, say, log) -> tuple[str, int, int]:
    """Every point transcribed (one transcript cache for the sweep) and measured. Returns the ASR
    tag, the transcriptions made and the cache hits."""
    from eval.runs.measure import measure
    from eval.runs.score import asr_tag, score
    from eval.scoring.transcript_cache import CachedTranscriber

    tag = asr_tag(asr)
    cached = CachedTranscriber(asr, out / "asr_cache" / f"{tag}.jsonl", weights_cache=cache, inner=transcriber)
    for i, p in enumerate(points):
        say(i / len(points), f"ASR: point {i + 1} of {len(points)}")
        score(out / point_name(p), asr, transcriber=cached, log=log)
        measure(out / point_name(p), dnsmos=dnsmos, log=log)
    return tag, cached.misses, cached.hits


def _summarize(out: Path, points: list[dict], tag: str | None, derail) -> None:
    """Each point's report and summary, and sweep.csv: a line per point."""
    from eval.report.markdown import make_report
    from eval.report.summary import write_outputs

    lines = []
    for p in points:
        d = out / point_name(p)
        if tag is not None:
            make_report(d, tag, derail)
        _, summ = write_outputs(d, tag, derail=derail)
        lines.append({**p, **point_line(summ), "run": d.name})
    df = pd.DataFrame(lines)
    replace_atomic(out / "sweep.csv", lambda tmp: df.to_csv(tmp, index=False))


def point_line(summ: dict) -> dict:
    o = summ["overall"]

    def v(name, key="value"):
        return (o.get(name) or {}).get(key)

    return {
        "n": o["n"], "n_scored": o.get("n_scored"),
        "wer_corpus": v("wer_corpus"), "wer_ci_low": v("wer_corpus", "ci_low"), "wer_ci_high": v("wer_corpus", "ci_high"),
        "stop_fired_rate": v("stop_fired_rate"), "premature_stop_rate": v("premature_stop_rate"),
        "duration_ratio_median": (o.get("duration_ratio") or {}).get("median"),
        "speaker_sim": v("speaker_sim"), "speaker_sim_ci_low": v("speaker_sim", "ci_low"),
        "speaker_sim_ci_high": v("speaker_sim", "ci_high"),
        **failure_columns(o.get("failures") or {}),
        **share_columns("clean", o.get("clean_rate")),
        "reward_mean": v("reward"), "reward_ci_low": v("reward", "ci_low"), "reward_ci_high": v("reward", "ci_high"),
        "stop_lag_ms_median": (o.get("stop_lag_ms") or {}).get("median"),
        # naturalness rides along for reading, never for ranking (eval/scoring/naturalness.py)
        "dnsmos_ovrl": ((o.get("naturalness") or {}).get("dnsmos_ovrl") or {}).get("value"),
    }


# sweep.csv's failure columns, from the point's failure table (eval/report/failures.py):
# <name>_k of <name>_n utterances, <name>_rate = k / n and its Wilson 95% interval (a rate of
# 0 of 30 gets [0, 11.4%], not the bootstrap's [0, 0]). None where n = 0 (nothing judged).
SWEEP_FAILURES = {"catastrophic": "catastrophic", "runaway": "runaway", "force_stop": "force_stop", "derail": "derail",
                  "truncated": "truncation", "loop": "loop", "long_pause": "long_pause", "any": "failure"}


def failure_columns(failures: dict) -> dict:
    out = {}
    for entry, name in SWEEP_FAILURES.items():
        c = failures.get(entry) or {}
        n = c.get("n")
        out.update({f"{name}_k": c.get("k") if n else None, f"{name}_n": n or None,
                    f"{name}_rate": c.get("rate") if n else None, f"{name}_ci_low": c.get("ci_low") if n else None,
                    f"{name}_ci_high": c.get("ci_high") if n else None})
    return out


def share_columns(name: str, share: dict | None) -> dict:
    """<name>_rate, _k, _n, _ci_low, _ci_high of a summary rate of events (the clean rollouts)."""
    c = share or {}
    return {f"{name}_rate": c.get("value"), f"{name}_k": c.get("k"), f"{name}_n": c.get("n"),
            f"{name}_ci_low": c.get("ci_low"), f"{name}_ci_high": c.get("ci_high")}
