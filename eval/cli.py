"""`python -m eval ...`: the command line. Flags become dataclasses here, once."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from eval.scoring.derail import add_derail_flags, rule_from_args
from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
from gepard_demo.settings_flags import add_settings_flags, settings_from_args


def add_asr_flags(p: argparse.ArgumentParser, required: bool = False) -> None:
    g = p.add_argument_group("ASR")
    g.add_argument("--asr", choices=["faster-whisper", "openai-whisper"], default="faster-whisper" if required else None,
                   help="Whisper backend" + ("" if required else " (given: score and report right after synthesis)"))
    g.add_argument("--asr-model", default="tiny.en", help="tiny.en, base (pip bundles) or a local CTranslate2 folder / .pt file")
    g.add_argument("--compute-type", default="int8", help="faster-whisper CTranslate2 compute type")
    g.add_argument("--beam-size", type=int, default=1, help="1 = greedy")
    g.add_argument("--no-vad", action="store_true", help="do not trim non-speech with Silero VAD")
    g.add_argument("--asr-threads", type=int, default=0)
    g.add_argument("--cache", default=None, help="where converted / assembled Whisper weights go (default ~/.cache/gepard-eval)")
    g.add_argument("--dnsmos", choices=("on", "off"), default="on",
                   help="DNSMOS naturalness for every utterance (on, the default: a run's contents follow from its "
                        "command, never from the machine's load; its measured cost is printed) or none (off, for "
                        "quick runs); VAD timing, F0 and loops always run")
    g.add_argument("--no-dnsmos", dest="dnsmos", action="store_const", const="off", help="= --dnsmos off")


def asr_settings(args):
    from eval.scoring.asr import ASRSettings

    return ASRSettings(backend=args.asr, model=args.asr_model, compute_type=args.compute_type,
                       beam_size=args.beam_size, vad=not args.no_vad, threads=args.asr_threads).validate()


def _cache(args) -> Path:
    from gepard_demo.alignment.weights import DEFAULT_CACHE

    return Path(args.cache) if args.cache else DEFAULT_CACHE


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
                                 "seeds": args.seeds}.items() if v is not None}
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
    cfg.validate()  # --server-url given, timeout sane
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
    return _score_and_report(args, args.run_dir, rule_from_args(args))


def cmd_report(args) -> int:
    from eval.report.markdown import make_report

    print(make_report(args.run_dir, args.asr_tag, rule_from_args(args)))
    return 0


def cmd_compare(args) -> int:
    """Every NEW run against BASE (paired, overall and per category), the gate's breaches, and the
    comparison folder; exit 1 when any run breaches the gate, 2 on input that cannot be compared."""
    from eval.compare.folder import compare_into
    from eval.compare.gate import Gate

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

    folder = Path(args.session)
    if args.new:
        session = Session.open(folder.parent.parent, folder.name, args.new, args.seed)
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
    from eval.runs.run import RunConfig
    from eval.sweeps.grid import SweepConfig, parse_axes
    from eval.sweeps.sweep import sweep

    derail = rule_from_args(args)
    sampling, stream = settings_from_args(args, SamplingSettings(), StreamSettings())
    base = RunConfig(engine=args.engine, model=args.model, set=args.set, sampling=sampling, stream=stream,
                     batch_size=args.batch_size, base_seed=args.seed, seeds=args.seeds, limit=args.limit, device=args.device,
                     model_cache=args.model_cache, ref_audio=str(Path(args.ref_audio).resolve()) if args.ref_audio else None)
    sc = SweepConfig(base=base, temperatures=tuple(args.temperatures), stop_thresholds=tuple(args.stop_thresholds),
                     extra_axes=parse_axes(args.axis or []), one_pass=not args.brute_force)
    asr = asr_settings(args) if args.asr else None
    print(sweep(sc, args.out, asr=asr, cache=_cache(args), dnsmos=getattr(args, "dnsmos", "on"), derail=derail))
    return 0


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eval", description="Gepard evaluation: synthesize, score with Whisper, report, compare.")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="batch synthesis into a run folder (resumable)")
    r.add_argument("--out", required=True, help="run folder, e.g. runs/NAME (rerun the same command to resume)")
    r.add_argument("--engine", choices=["local", "local-stream", "server", "piper", "files"], default=None,
                   help="local: Gepard batched (default); local-stream: Gepard through the app's streaming session, "
                        "one at a time (measured TTFA); server: a served Gepard (vLLM-Omni or `python -m gepard_demo "
                        "serve`) at --server-url; piper: the real-speech reference; files: audio already made "
                        "(--files), scored like any run")
    r.add_argument("--files", default=None, metavar="DIR_OR_MANIFEST",
                   help="--engine files: a folder of <id>.wav (.flac .ogg .mp3), or a JSONL/CSV manifest of id, path")
    r.add_argument("--server-url", action="append", default=None,
                   help="--engine server: http://HOST:PORT of the speech API; repeat it for a pool of servers")
    r.add_argument("--server-urls", default=None, metavar="FILE",
                   help="--engine server: a file of server URLs, one a line (added to --server-url)")
    r.add_argument("--concurrency", type=int, default=None,
                   help="--engine server: requests in flight per server (default 1)")
    r.add_argument("--server-timeout", type=float, default=None,
                   help="--engine server: seconds to wait to connect or for the next bytes (default 60)")
    r.add_argument("--model", default=None, help="Gepard model: tiny, a local dir or a hub id (default tiny)")
    r.add_argument("--set", default=None, help="built-in set (core, smoke) or a .jsonl/.txt file (default smoke)")
    r.add_argument("--limit", type=int, default=None, help="first N utterances only")
    r.add_argument("--category", action="append", help="only this category (repeatable)")
    r.add_argument("--batch-size", type=int, default=None, help="utterances per engine.generate call (default 4)")
    r.add_argument("--seed", type=int, default=None, help="base seed; each utterance's seed = f(base, id)")
    r.add_argument("--seeds", type=int, default=None, metavar="K",
                   help="K samples of every sentence (seed of sample k = f(base, id, k); sample 0 is the one-sample "
                        "run's): per-sentence failure probability, best-of-K WER, spread across seeds")
    r.add_argument("--device", default=None)
    r.add_argument("--model-cache", default=None, help="cache folder for `tiny` / hub models (default: gepard_demo's)")
    r.add_argument("--torch-threads", type=int, default=1, help="torch threads for synthesis (1 is fastest here, facts §8)")
    r.add_argument("--ref-audio", default=None, help="speak every sentence in this voice (3-15 s recording); "
                                                      "a set's per-sentence ref_audio column wins; adds speaker similarity")
    add_settings_flags(r)
    r.add_argument("--text-repetition", choices=("on", "off"), default=None,
                   help="off: one copy of the text in every prompt, whatever its length (the authors' no-repetition "
                        "baseline, MODEL_GUIDE §5.3); refused where it would change nothing, and for engines that do not "
                        "build the prompt here (server, piper, files). Part of the run's identity")
    add_asr_flags(r)
    add_derail_flags(r)
    r.set_defaults(func=cmd_run)

    s = sub.add_parser("score", help="transcribe a run with Whisper (resumable), then write the report")
    s.add_argument("run_dir")
    add_asr_flags(s, required=True)
    add_derail_flags(s)
    s.set_defaults(func=cmd_score)

    rp = sub.add_parser("report", help="table.csv/parquet, summary.json, report.md and charts of a run")
    rp.add_argument("run_dir")
    rp.add_argument("--asr-tag", default=None, help="which ASR scores (default: the latest)")
    add_derail_flags(rp)
    rp.set_defaults(func=cmd_report)

    c = sub.add_parser("compare", help="paired comparison of scored runs against a base, overall and per category; "
                                       "exit 1 when a run breaches the gate")
    c.add_argument("base")
    c.add_argument("new", nargs="+", help="one or more runs, each compared with the base")
    c.add_argument("--gate", default=None, help="YAML gate file: the worsening allowed per measure, overall and per "
                                                "category (eval/gates/example.yaml); default: the overall corpus WER "
                                                "may not rise significantly")
    c.add_argument("--max-wer-increase", type=float, default=None,
                   help="allowed overall corpus WER increase (0.01 = 1 point), on top of --gate")
    c.add_argument("--asr-tag", default=None)
    c.add_argument("--out", default=None, help="the comparison folder (default: NEW/compare-vs-BASE)")
    c.add_argument("--json", default=None, help="also copy compare.json here")
    add_derail_flags(c)
    c.set_defaults(func=cmd_compare)

    ls = sub.add_parser("listening", help="a blind listening test's report from its votes (the Eval tab collects them); "
                                          "--new RUN RUN... makes the session")
    ls.add_argument("session", help="the session folder: RUNS_DIR/listening/NAME")
    ls.add_argument("--new", nargs="+", default=None, metavar="RUN", help="make it: these runs (folder names in RUNS_DIR)")
    ls.add_argument("--seed", type=int, default=0, help="the seed that shuffles the pairs and their sides")
    ls.set_defaults(func=cmd_listening)

    sw = sub.add_parser("sweep", help="grid over temperature x stop threshold (x --axis), one run folder per point")
    sw.add_argument("--out", required=True)
    sw.add_argument("--engine", choices=["local", "local-stream"], default="local")
    sw.add_argument("--model", default="tiny")
    sw.add_argument("--set", default="smoke")
    sw.add_argument("--limit", type=int, default=None)
    sw.add_argument("--batch-size", type=int, default=4)
    sw.add_argument("--seed", type=int, default=1234)
    sw.add_argument("--seeds", type=int, default=1, metavar="K", help="K samples of every sentence at every point")
    sw.add_argument("--device", default="cpu")
    sw.add_argument("--model-cache", default=None)
    sw.add_argument("--temperatures", type=float, nargs="+", default=[0.3, 0.7, 1.0])
    sw.add_argument("--stop-thresholds", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    sw.add_argument("--axis", action="append", metavar="NAME=V1,V2",
                    help="another sampling setting to sweep (repeatable), e.g. top_k=0,4")
    sw.add_argument("--brute-force", action="store_true",
                    help="run every point on its own (default with --engine local: one generation per temperature "
                         "group serves every stop threshold, exactly)")
    sw.add_argument("--ref-audio", default=None, help="speak every sentence in this voice (voice cloning; "
                                                       "CFG scale is an axis: --axis cfg_scale=1,2,3)")
    add_settings_flags(sw)
    add_asr_flags(sw)
    add_derail_flags(sw)
    sw.set_defaults(func=cmd_sweep)

    sc = sub.add_parser("stream-chart", help="chunk size against TTFA and stalls on simulated hardware, boundary SNR "
                                             "against lookback, codec cost (real decodes of generated frames)")
    sc.add_argument("--out", required=True)
    sc.add_argument("--model", default="tiny")
    sc.add_argument("--model-cache", default=None)
    sc.add_argument("--set", default="smoke")
    sc.add_argument("--limit", type=int, default=2)
    sc.add_argument("--max-frames", type=int, default=100)
    sc.add_argument("--seed", type=int, default=1234)
    sc.add_argument("--chunk-sizes", type=int, nargs="+", default=[5, 10, 20, 43, 86])
    sc.add_argument("--lookbacks", type=int, nargs="+", default=[0, 4, 8, 16, 24])
    sc.add_argument("--rtfs", type=float, nargs="+", default=[0.1, 0.5, 0.9],
                    help="simulated generation speeds (seconds per second of audio)")
    sc.set_defaults(func=cmd_stream_chart)

    tc = sub.add_parser("tail-chart", help="fade / silence at the end of speech: end click and what Whisper makes "
                                           "of the end (deleted final words, invented words), on Piper's real speech")
    tc.add_argument("--out", required=True)
    tc.add_argument("--set", default="core")
    tc.add_argument("--limit", type=int, default=20)
    tc.add_argument("--fades-ms", type=float, nargs="+", default=[0, 5, 10, 20, 50])
    tc.add_argument("--silences-ms", type=float, nargs="+", default=[0, 100, 300])
    add_asr_flags(tc, required=True)
    tc.set_defaults(func=cmd_tail_chart)

    st = sub.add_parser("sets", help="list the built-in test sets")
    st.set_defaults(func=cmd_sets)
    return p


def main(argv: list[str] | None = None) -> int:
    from eval.engines.base import EngineError
    from eval.compare.table import CompareError
    from eval.runs.run import RunError
    from eval.runs.sets import SetError
    from eval.scoring.derail import DerailRuleError
    from gepard_demo.alignment.weights import WeightsNotFound
    from gepard_demo.codec import CodecLoadError
    from gepard_demo.model.source import ModelNotFoundError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SetError, RunError, EngineError, SettingsError, WeightsNotFound, CompareError, FileNotFoundError,
            DerailRuleError, FileExistsError, NotADirectoryError, ModelNotFoundError, CodecLoadError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
