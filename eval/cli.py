"""`python -m eval ...`: the command line (its flags: parser.py). Flags become dataclasses here, once."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from eval.parser import build_parser
from eval.scoring.derail import rule_from_args
from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
from gepard_demo.settings_flags import settings_from_args


def asr_settings(args):
    from eval.scoring.asr import ASRSettings

    return ASRSettings(backend=args.asr, model=args.asr_model, compute_type=args.compute_type,
                       beam_size=args.beam_size, vad=not args.no_vad, threads=args.asr_threads)


def _cache(args) -> Path:
    from gepard_demo.alignment.weights import DEFAULT_CACHE

    return Path(args.cache) if args.cache else DEFAULT_CACHE


def _voices_dir() -> str:
    """The saved voices' default folder, as `serve` reads it (gepard_demo/__main__.py)."""
    from gepard_demo.voice.library import default_voices_dir

    return str(default_voices_dir(os.environ))


def cmd_run(args) -> int:
    from eval.runs.run import RunConfig, run, saved_config

    derail = rule_from_args(args)  # a bad threshold is refused before anything is synthesized

    saved = saved_config(args.out)
    base = saved or RunConfig()
    changes = {k: v for k, v in {"engine": args.engine, "model": args.model, "set": args.set, "batch_size": args.batch_size,
                                 "base_seed": args.seed, "limit": args.limit, "device": args.device,
                                 "model_cache": args.model_cache,
                                 "ref_audio": str(Path(args.ref_audio).resolve()) if args.ref_audio else None,
                                 "categories": tuple(args.category) if args.category else None,
                                 "seeds": args.seeds, "voices": tuple(args.voice) if args.voice else None}.items()
               if v is not None}
    if args.voice or args.voices_dir:  # where saved voices are read here: a path of this machine, not the identity
        changes["voices_dir"] = str(Path(args.voices_dir or _voices_dir()).expanduser().resolve())
    urls = _server_urls(args)
    changes.update({k: v for k, v in {"server_urls": urls, "server_timeout": args.server_timeout,
                                      "server_concurrency": args.concurrency}.items() if v is not None})
    sampling, stream = settings_from_args(args, base.sampling, base.stream)
    if args.text_repetition is not None:
        sampling = sampling.replace(text_repetition=args.text_repetition == "on")
    if not saved and changes.get("engine") == "piper" and "model" not in changes:
        changes["model"] = "en_US-joe-medium"  # the voice Piper speaks with; --model is Gepard's
    if args.files:  # --engine files: the source is the run's "model" (part of its identity)
        changes["model"] = str(Path(args.files).resolve())
    cfg = dataclasses.replace(base, sampling=sampling, stream=stream, **changes)
    if cfg.engine == "server":
        cfg = _server_config(cfg, saved, changes)
    if saved:
        print(f"{args.out}: existing run, resuming", file=sys.stderr)
    import torch

    torch.set_num_threads(args.torch_threads)
    run(cfg, args.out, log=lambda m: print(m, file=sys.stderr))
    if args.asr:
        return _score_and_report(args, args.out, derail)
    from eval.report.markdown import make_report

    print(make_report(args.out, derail=derail))
    return 0


def _server_urls(args) -> tuple[str, ...] | None:
    """--server-url (repeatable) and --server-urls FILE (one URL a line, # comments), in order."""
    urls = list(args.server_url or [])
    if args.server_urls:
        try:
            lines = Path(args.server_urls).read_text().splitlines()
        except OSError as e:
            raise FileNotFoundError(f"--server-urls {args.server_urls}: {e.strerror}") from None
        urls += [ln.split("#", 1)[0].strip() for ln in lines if ln.split("#", 1)[0].strip()]
    if len(set(urls)) != len(urls):
        from eval.runs.run import RunError

        raise RunError(f"a server URL is given twice: {urls}; use --concurrency for more requests per server")
    return tuple(urls) or None


def _server_config(cfg, saved, changes: dict):
    """--engine server, checked before anything is written: settings fixed per server are
    refused, a server must answer, and the run is named after the model it serves."""
    from eval.engines.served import GepardServer, ServerError, check_server_settings

    check_server_settings(cfg.sampling, cfg.stream)
    errors = []
    for url in cfg.server_urls:  # the first that answers names the model; the run checks them all
        try:
            served = GepardServer(url, cfg.server_timeout).served_model()
            break
        except ServerError as e:
            errors.append(e)
    else:
        raise errors[0]
    if not saved:
        # Rows are written as each utterance comes back, so a server that dies mid-run loses
        # nothing already synthesized.
        cfg = dataclasses.replace(cfg, model=changes.get("model", served), batch_size=changes.get("batch_size", 1))
    if cfg.model != served:
        raise ServerError(f"Gepard server at {url} serves {served!r}, but this run is for {cfg.model!r}")
    return cfg


def _score_and_report(args, run_dir, derail) -> int:
    from eval.report.markdown import make_report
    from eval.runs.measure import measure
    from eval.runs.score import score

    tag = score(run_dir, asr_settings(args), cache=_cache(args))
    measure(run_dir, dnsmos=args.dnsmos)
    path = make_report(run_dir, tag, derail)
    summary = json.loads((Path(run_dir) / "summary.json").read_text())["overall"]
    w = summary.get("wer_corpus")
    if w:
        print(f"corpus WER {100 * w['value']:.2f}% [{100 * w['ci_low']:.2f}, {100 * w['ci_high']:.2f}] ({tag}, n={summary['n_scored']})")
    print(path)
    return 0


def cmd_score(args) -> int:
    from eval.runs.locate import run_path

    return _score_and_report(args, run_path(args.run_dir), rule_from_args(args))


def cmd_report(args) -> int:
    from eval.report.markdown import make_report
    from eval.runs.locate import run_path

    print(make_report(run_path(args.run_dir), args.asr_tag, rule_from_args(args)))
    return 0


def cmd_compare(args) -> int:
    """Every NEW run against BASE (paired, overall and per category), the gate's breaches, and the
    comparison folder; exit 1 when any run breaches the gate, 2 on input that cannot be compared."""
    from eval.compare.folder import compare_into
    from eval.compare.gate import Gate
    from eval.runs.locate import run_path

    args.base, args.new = run_path(args.base), [run_path(n) for n in args.new]
    gate = Gate.load(args.gate) if args.gate else Gate.max_wer_increase(0.0)
    if args.max_wer_increase is not None:  # the former flag: a limit on the overall corpus WER
        gate = gate.with_overall_wer(args.max_wer_increase)
    out = Path(args.out) if args.out else Path(args.new[0]) / f"compare-vs-{Path(args.base).name}"
    _, written = compare_into(out, args.base, args.new, gate, args.asr_tag, rule_from_args(args))
    print((out / "compare.md").read_text())
    if args.json:
        import shutil

        shutil.copyfile(out / "compare.json", args.json)
    breaches = [line for lines in written["breaches"].values() for line in lines]
    for new, lines in written["breaches"].items():
        for line in lines:
            print(f"REGRESSION in {new}: {line}", file=sys.stderr)
    print("REGRESSION: " + f"{len(breaches)} breach(es) of the gate" if breaches else "no significant regression")
    print(f"comparison folder: {out}", file=sys.stderr)
    return 1 if breaches else 0


def cmd_listening(args) -> int:
    """A listening session's report (listening.md / .json) from its votes; --new makes the session."""
    from eval.listening.session import Session, write_report

    from eval.runs.locate import name_in, run_path

    folder = Path(args.session)
    if args.new:  # each run by its path or its name in the session's runs folder, kept as that name
        runs_dir = folder.parent.parent
        session = Session.open(runs_dir, folder.name, [name_in(run_path(r, runs_dir), runs_dir) for r in args.new],
                               args.seed)
    else:
        if not (folder / "session.json").is_file():
            raise FileNotFoundError(f"{folder} is not a listening session (no session.json); make one with --new RUN RUN")
        session = Session(folder)
    print(write_report(session).read_text())
    return 0


def cmd_sets(args) -> int:
    from collections import Counter

    from eval.runs.sets import builtin_sets, load_set

    for name in builtin_sets():
        items = load_set(name)
        cats = Counter(u.category for u in items)
        print(f"{name}: {len(items)} utterances; " + ", ".join(f"{c} {n}" for c, n in cats.items()))
    return 0


def cmd_sweep(args) -> int:
    from eval.progress import FractionBar
    from eval.runs.run import RunConfig
    from eval.sweeps.grid import DEFAULT_AXES, SweepConfig, parse_axes
    from eval.sweeps.sweep import sweep

    derail = rule_from_args(args)
    sampling, stream = settings_from_args(args, SamplingSettings(), StreamSettings())
    base = RunConfig(engine=args.engine, model=args.model, set=args.set, sampling=sampling, stream=stream,
                     batch_size=args.batch_size, base_seed=args.seed, seeds=args.seeds, limit=args.limit, device=args.device,
                     model_cache=args.model_cache, ref_audio=str(Path(args.ref_audio).resolve()) if args.ref_audio else None)
    flags = tuple((name, tuple(vars(args)[f"axis_{name}"])) for name in DEFAULT_AXES)
    sc = SweepConfig(base=base, swept=flags + parse_axes(args.axis or []), one_pass=not args.brute_force)
    asr = asr_settings(args) if args.asr else None
    bar = FractionBar(f"sweep {Path(args.out).name}")
    try:
        csv = sweep(sc, args.out, asr=asr, cache=_cache(args), dnsmos=getattr(args, "dnsmos", "on"), derail=derail,
                    progress=bar, log=_say)
    finally:
        bar.close()
    print(csv)
    return 0


def _say(line: str) -> None:
    """A line on stderr that leaves the progress bars below it whole."""
    from tqdm import tqdm

    tqdm.write(line, file=sys.stderr)


def cmd_stream_chart(args) -> int:
    from eval.charts.stream_chart import StreamChartConfig, stream_chart

    cfg = StreamChartConfig(model=args.model, model_cache=args.model_cache, set=args.set, limit=args.limit, base_seed=args.seed,
                            max_frames=args.max_frames, chunk_sizes=tuple(args.chunk_sizes),
                            lookback_frames=tuple(args.lookbacks), hardware_rtfs=tuple(args.rtfs))
    print(stream_chart(cfg, args.out))
    return 0


def cmd_tail_chart(args) -> int:
    from eval.charts.tail_chart import TailChartConfig, tail_chart

    cfg = TailChartConfig(set=args.set, limit=args.limit, fades_ms=tuple(args.fades_ms), silences_ms=tuple(args.silences_ms))
    print(tail_chart(cfg, args.out, asr_settings(args), cache=_cache(args)))
    return 0


def cmd_load(args) -> int:
    import dataclasses as dc

    from eval.load.client import LoadError
    from eval.load.folder import default_out, run_load
    from eval.load.gate import LoadGate
    from eval.load.metrics import PERCENTILES, parse_goodput
    from eval.load.runner import LoadConfig
    from eval.runs.sets import load_set

    try:
        extra = json.loads(args.extra_body) if args.extra_body else {}
        if not isinstance(extra, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        raise LoadError(f"--extra-body: {args.extra_body!r} is not a JSON object of request fields ({e})") from None
    try:
        goodput = parse_goodput(args.goodput)
    except ValueError as e:
        raise LoadError(str(e)) from None
    percentiles = args.percentiles or PERCENTILES
    base = LoadConfig(urls=tuple(u.rstrip("/") for u in args.url), texts=tuple(u.text for u in load_set(args.set)),
                      num_prompts=args.num_prompts, request_rate=args.request_rate, burstiness=args.burstiness,
                      num_warmups=args.num_warmups, extra_body=extra, goodput=goodput, percentiles=percentiles,
                      seed=args.seed, timeout_s=args.timeout,
                      max_concurrency=args.max_concurrency if args.max_concurrency is not None
                      else None if args.request_rate != float("inf") and not args.sweep_concurrency else 1)
    points = [dc.replace(base, max_concurrency=c) for c in args.sweep_concurrency] if args.sweep_concurrency else [base]
    gate = LoadGate.load(args.gate, percentiles) if args.gate else None
    out = Path(args.out) if args.out else default_out()
    outcome = run_load(points, out, gate, log=lambda m: print(m, file=sys.stderr))
    print(outcome.report)
    if outcome.interrupted:
        return 130
    if not outcome.measured:
        print("error: no request completed: nothing was measured (see the failed requests in the report)", file=sys.stderr)
        return 2
    for breach in outcome.breaches or []:
        print(f"gate: {breach}", file=sys.stderr)
    return 1 if outcome.breaches else 0


COMMANDS = {
    "run": cmd_run,
    "score": cmd_score,
    "report": cmd_report,
    "compare": cmd_compare,
    "listening": cmd_listening,
    "sweep": cmd_sweep,
    "stream-chart": cmd_stream_chart,
    "tail-chart": cmd_tail_chart,
    "sets": cmd_sets,
    "load": cmd_load,
}


def main(argv: list[str] | None = None) -> int:
    from eval.engines.base import EngineError
    from eval.compare.table import CompareError
    from eval.load.client import LoadError
    from eval.runs.run import RunError
    from eval.runs.sets import SetError
    from eval.scoring.derail import DerailRuleError
    from gepard_demo.alignment.weights import WeightsNotFound
    from gepard_demo.codec import CodecLoadError
    from gepard_demo.model.checkpoints.source import ModelNotFoundError

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except (SetError, RunError, EngineError, SettingsError, WeightsNotFound, CompareError, FileNotFoundError,
            DerailRuleError, LoadError, FileExistsError, NotADirectoryError, ModelNotFoundError, CodecLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
