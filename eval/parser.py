"""The `python -m eval` command line: every subcommand's flags (cli.py runs them).

Each subcommand is its own builder, so a reader finds a command's flags in one place; the sampling
and stream flags come from the settings' own declarations (gepard_demo/settings_flags.py).
"""

from __future__ import annotations

import argparse
import math

from eval.runs.sets import builtin_sets
from eval.scoring.derail import add_derail_flags
from gepard_demo.settings_flags import add_settings_flags


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eval", description="Gepard evaluation: synthesize, score with Whisper, report, compare.")
    sub = p.add_subparsers(dest="cmd", required=True)
    _add_run(sub)
    _add_score(sub)
    _add_report(sub)
    _add_compare(sub)
    _add_listening(sub)
    _add_sweep(sub)
    _add_stream_chart(sub)
    _add_tail_chart(sub)
    _add_sets(sub)
    _add_load(sub)
    return p


def _add_run(sub) -> None:
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
    r.add_argument("--set", default=None, help=f"built-in set ({', '.join(builtin_sets())}) or a .jsonl/.txt file (default smoke)")
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
    r.add_argument("--voice", action="append", default=None, metavar="NAME",
                   help="speak every sentence in this saved voice (repeatable: each sentence in each, paired by seed); "
                        "local engines read it from --voices-dir, a server must list it; adds speaker similarity "
                        "and a per-voice breakdown")
    r.add_argument("--voices-dir", default=None,
                   help="saved voices' folder (default: $SPEAKER_SAMPLES_DIR, else ~/.cache/gepard-demo/voices)")
    add_settings_flags(r)
    r.add_argument("--text-repetition", choices=("on", "off"), default=None,
                   help="off: one copy of the text in every prompt, whatever its length (the authors' no-repetition "
                        "baseline, MODEL_GUIDE §5.3); refused where it would change nothing, and for engines that do not "
                        "build the prompt here (server, piper, files). Part of the run's identity")
    add_asr_flags(r)
    add_derail_flags(r)


def _add_score(sub) -> None:
    s = sub.add_parser("score", help="transcribe a run with Whisper (resumable), then write the report")
    s.add_argument("run_dir")
    add_asr_flags(s, required=True)
    add_derail_flags(s)


def _add_report(sub) -> None:
    rp = sub.add_parser("report", help="table.csv/parquet, summary.json, report.md and charts of a run")
    rp.add_argument("run_dir")
    rp.add_argument("--asr-tag", default=None, help="which ASR scores (default: the latest)")
    add_derail_flags(rp)


def _add_compare(sub) -> None:
    c = sub.add_parser("compare", help="paired comparison of scored runs against a base, overall and per category; "
                                       "exit 1 when a run breaches the gate")
    c.add_argument("base")
    c.add_argument("new", nargs="+", help="one or more runs, each compared with the base")
    c.add_argument("--gate", default=None, help="YAML gate file: the worsening allowed per measure, overall and per "
                                                "category (eval/gates/example.yaml); default: the overall corpus WER "
                                                "may not rise significantly")
    c.add_argument("--max-wer-increase", type=float, default=None,
                   help="allowed overall corpus WER increase (0.01 = 1 point): with --gate it replaces the gate's "
                        "overall corpus_wer limit, the gate's other limits kept; without --gate it is the only "
                        "limit (default then 0)")
    c.add_argument("--asr-tag", default=None)
    c.add_argument("--out", default=None, help="the comparison folder (default: NEW/compare-vs-BASE)")
    c.add_argument("--json", default=None, help="also copy compare.json here")
    add_derail_flags(c)


def _add_listening(sub) -> None:
    ls = sub.add_parser("listening", help="a blind listening test's report from its votes (the Eval tab collects them); "
                                          "--new RUN RUN... makes the session")
    ls.add_argument("session", help="the session folder: RUNS_DIR/listening/NAME")
    ls.add_argument("--new", nargs="+", default=None, metavar="RUN",
                    help="make it: these runs (each a run folder's path, or its name in RUNS_DIR)")
    ls.add_argument("--seed", type=int, default=0, help="the seed that shuffles the pairs and their sides")


def _add_sweep(sub) -> None:
    from eval.sweeps.grid import DEFAULT_AXES, axis_words
    from gepard_demo.declare import declared
    from gepard_demo.settings import SamplingSettings

    grid = " x ".join(n.replace("_", " ") for n in DEFAULT_AXES)
    default_grid = " x ".join(f"{axis_words(n)} {' '.join(map(str, v))}" for n, v in DEFAULT_AXES.items())
    points = math.prod(len(v) for v in DEFAULT_AXES.values())
    sw = sub.add_parser("sweep", help=f"grid over {grid} (x --axis), one run folder per point",
                        description=f"A grid over {grid} (x any --axis), one run folder per point. Default grid: "
                                    f"{default_grid} ({points} points).")
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
    for name, values in DEFAULT_AXES.items():
        words = axis_words(name)
        sw.add_argument("--" + words.replace(" ", "-"), dest=f"axis_{name}", type=declared(SamplingSettings)[name].read,
                        nargs="+", default=list(values), metavar="VALUE",
                        help=f"the {words} to sweep (default: {' '.join(map(str, values))})")
    sw.add_argument("--axis", action="append", metavar="NAME=V1,V2",
                    help="another sampling setting to sweep (repeatable), e.g. top_k=0,4 or cfg_scale=1,2,3 "
                         "(a dash for the underscore works too)")
    sw.add_argument("--brute-force", action="store_true",
                    help="run every point on its own (default with --engine local: one generation serves every "
                         "stop threshold of a point's other settings, exactly)")
    sw.add_argument("--ref-audio", default=None, help="speak every sentence in this voice (voice cloning; "
                                                       "CFG scale is an axis: --axis cfg_scale=1,2,3)")
    add_settings_flags(sw)
    add_asr_flags(sw)
    add_derail_flags(sw)


def _add_stream_chart(sub) -> None:
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


def _add_tail_chart(sub) -> None:
    tc = sub.add_parser("tail-chart", help="fade / silence at the end of speech: end click and what Whisper makes "
                                           "of the end (deleted final words, invented words), on Piper's real speech")
    tc.add_argument("--out", required=True)
    tc.add_argument("--set", default="core")
    tc.add_argument("--limit", type=int, default=20)
    tc.add_argument("--fades-ms", type=float, nargs="+", default=[0, 5, 10, 20, 50])
    tc.add_argument("--silences-ms", type=float, nargs="+", default=[0, 100, 300])
    add_asr_flags(tc, required=True)


def _add_sets(sub) -> None:
    sub.add_parser("sets", help="list the built-in test sets")


def _add_load(sub) -> None:
    ld = sub.add_parser("load", help="load a speech server as `vllm bench serve --omni` does: audio_ttfp, e2el, "
                                     "audio_rtf, underrun and continuity at a concurrency or a request rate; "
                                     "exit 1 when a --gate bound breaks, 2 when nothing could be measured")
    ld.add_argument("url", nargs="+", help="http://HOST:PORT of a speech server (ours or vLLM-Omni); several: a pool, "
                                           "request i going to server i mod n")
    ld.add_argument("--out", default=None, help="the run's folder (default runs/load-DATE-TIME); must be new or empty")
    ld.add_argument("--set", default="core", help=f"texts: a built-in set ({', '.join(builtin_sets())}) or a .jsonl/.txt "
                                                   "file, taken in order and cycled")
    ld.add_argument("--num-prompts", type=int, default=12, help="requests a point")
    loop = ld.add_mutually_exclusive_group()
    loop.add_argument("--max-concurrency", type=int, default=None,
                      help="requests in flight at once (a closed loop with no --request-rate; default 1)")
    loop.add_argument("--sweep-concurrency", type=_int_list, default=None, metavar="N,N,...",
                      help="one point a concurrency, one after another (e.g. 1,2,4,8), and the knee chart")
    ld.add_argument("--request-rate", type=float, default=float("inf"),
                    help="requests per second, released at gamma-distributed intervals (Poisson at --burstiness 1); "
                         "default inf: all at once, --max-concurrency in flight")
    ld.add_argument("--burstiness", type=float, default=1.0, help="the intervals' gamma shape (1: Poisson)")
    ld.add_argument("--num-warmups", type=int, default=1, help="unmeasured requests before the first point")
    ld.add_argument("--extra-body", default=None, metavar="JSON",
                    help="fields added to every request, e.g. '{\"max_new_tokens\": 300, \"seed\": 1}' or our "
                         "extension fields (cfg_scale, repetition_penalty, ...: refused before the run by a server "
                         "that does not list them)")
    ld.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS",
                    help="SLOs for request_goodput, as the bench takes them: audio_ttfp:MS (or audio_ttft:MS) e2el:MS")
    ld.add_argument("--percentiles", type=_float_list, default=None, metavar="P,P,...",
                    help="percentiles of each figure (default 50,95,99)")
    ld.add_argument("--gate", default=None, help="YAML bounds per point (eval/gates/load-example.yaml): exit 1 naming "
                                                 "each breach")
    ld.add_argument("--seed", type=int, default=0, help="seeds the open loop's intervals")
    ld.add_argument("--timeout", type=float, default=600.0, help="seconds a request may wait for its next bytes")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas, got {text!r}") from None


def _float_list(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None
