"""Gepard-1.0 streaming demo: `python app.py` (or `make demo`), then open http://127.0.0.1:7860.

The only place the demo reads environment variables:
  GEPARD_MODEL         model to serve (a local checkpoint dir, a Hugging Face id, or `tiny`);
                       `--model` wins. Default: nineninesix/gepard-1.0. If it cannot be loaded
                       (offline, no local copy) the app starts on `tiny` and says so.
  GEPARD_CACHE_DIR     where `tiny` is built (default ~/.cache/gepard-demo); `--cache-dir` wins.
  GRADIO_SERVER_NAME   address to listen on (default 127.0.0.1); `--host` wins.
  GRADIO_SERVER_PORT   port (default 7860); `--port` wins.
  SPACE_ID             set on every Hugging Face Space: the Eval tab's runs are bounded there
                       (a visitor cannot hold the engine for long); `--public` / `--no-public` win.
                       It also makes the Space's proxies (private addresses) trusted to name the
                       visitor in X-Forwarded-For; `--trusted-proxies` wins.
  SPACES_ZERO_GPU      set on a ZeroGPU Space, read through the `spaces` package: GPU work runs
                       in @spaces.GPU calls (gepard_demo/zerogpu); `--zerogpu` wins.
  SPEAKER_SAMPLES_DIR  the saved voices' folder (the speech server's too); `--voices-dir` wins.
  GEPARD_VISITOR_SECRET the key a public page encrypts each visitor's saved-voices token with in
                       their browser; default: one made once beside the voices (.visitor-secret),
                       so a visitor keeps their voices across restarts (docs/DEPLOY.md §6).

`python app.py --server-url URL` puts the page in front of a served model (vLLM-Omni or
`python -m gepard_demo serve`) instead of loading one: see gepard_demo/ui/hosts/served.py.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import ipaddress
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gepard_demo.alignment.settings import DEFAULT_WEIGHTS
from gepard_demo.model.checkpoints.source import DEFAULT_MODEL
from gepard_demo.host_settings import LOOPBACK_PROXIES, PRIVATE_PROXIES, TrafficSettings
from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
from gepard_demo.settings_flags import add_batching_flags, batching_from_args
from gepard_demo.speed.flags import add_speed_flags
from gepard_demo.streaming.text_input import CHAPTER_CHARS, MAX_TEXT_CHARS

if TYPE_CHECKING:
    from gepard_demo.ui.page.saved_voices import SavedVoiceSettings

# Streaming defaults for the page. Chunks of 10 frames (0.46 s) after a 10-frame first chunk:
# on CPU the talker is only a few times faster than real time, so vLLM-Omni's 86-frame chunks
# (4 s of audio made while only 0.46 s plays) would leave gaps; exact decoding carries the
# codec state, so small chunks cost no re-decode.
DEMO_STREAM = StreamSettings(first_chunk_frames=10, chunk_frames=10, decode_mode="exact", fade_ms=20.0)


def find_eval_tab() -> tuple[Any, str | None]:
    """(eval.ui.tab.build_eval_tab, None); (None, None) without an eval package (a Space that
    copied gepard_demo alone); (None, why) when it is there but fails to import, so the page says
    why instead of silently hiding the tab. Looked up here: gepard_demo never imports eval."""
    if importlib.util.find_spec("eval") is None:
        return None, None
    try:
        from eval.ui.tab import build_eval_tab
    except Exception as exc:  # shown in the tab; the demo itself must still start
        return None, f"{type(exc).__name__}: {exc}"
    return build_eval_tab, None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser(os.environ).parse_args(argv)


def build_parser(env) -> argparse.ArgumentParser:
    """The app's flags; each default is its environment variable's value where `env` has one."""
    from gepard_demo.voice.library import default_voices_dir

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=env.get("GEPARD_MODEL") or DEFAULT_MODEL,
                   help="local checkpoint dir, Hugging Face id, or 'tiny' (env GEPARD_MODEL)")
    p.add_argument("--cache-dir", default=env.get("GEPARD_CACHE_DIR") or None,
                   help="where the tiny model is built (env GEPARD_CACHE_DIR)")
    p.add_argument("--host", default=env.get("GRADIO_SERVER_NAME") or "127.0.0.1",
                   help="listen address (env GRADIO_SERVER_NAME)")
    p.add_argument("--port", type=int, default=int(env.get("GRADIO_SERVER_PORT") or 7860),
                   help="listen port (env GRADIO_SERVER_PORT)")
    p.add_argument("--device", default=None, help="cpu or cuda[:n] (default: cuda when available)")
    # --precision (auto: fp16w backbone on a CPU, bf16 on a GPU), --threads, --pipeline
    add_speed_flags(p)
    # --max-batch (visitors decoding together, default 4), --admission (realtime: only while the
    # running streams stay real time). Not behind ZeroGPU: there each visitor's utterance is its own call.
    add_batching_flags(p)
    p.add_argument("--per-client", type=int, default=None,
                   help="one visitor's (address's) Generates running at once; one more is refused at once "
                        "(default: half of --max-batch, at least 1, so others keep the rest)")
    p.add_argument("--trusted-proxies", default=PRIVATE_PROXIES if env.get("SPACE_ID") else LOOPBACK_PROXIES,
                   help="peers (addresses, networks) whose X-Forwarded-For names the visitor; others are the "
                        "visitor themselves (default: loopback; on a Space (env SPACE_ID) private networks too)")
    p.add_argument("--no-eval-tab", action="store_true", help="leave out the Eval tab")
    p.add_argument("--zerogpu", choices=("auto", "off", "emulate"), default="auto",
                   help="auto: GPU work in @spaces.GPU calls when the `spaces` package reports a ZeroGPU Space; "
                        "emulate: run it in a forked worker process the same way, on any machine (tests)")
    p.add_argument("--public", action=argparse.BooleanOptionalAction, default=bool(env.get("SPACE_ID")),
                   help="bound the Eval tab's runs and the text a Generate takes for a public page (default: on a "
                        "Hugging Face Space, env SPACE_ID)")
    p.add_argument("--max-text-chars", type=int, default=None,
                   help=f"the longest text a Generate takes (default: {MAX_TEXT_CHARS} on a public page, where it must "
                        f"fit a visitor's GPU quota and share the engine; else a chapter, {CHAPTER_CHARS})")
    p.add_argument("--captions", action=argparse.BooleanOptionalAction, default=True,
                   help="the words under the player, timed by the aligner on this CPU off the stream's path "
                        "(in front of a server: the server's word_timestamps, when it lists them)")
    p.add_argument("--caption-weights", default=DEFAULT_WEIGHTS,
                   help=f"Whisper weights the captions align with: {DEFAULT_WEIGHTS} (the default: both, their readings' median), "
                        "tiny.en, base, or a path")
    p.add_argument("--voices-dir", type=Path, default=default_voices_dir(env),
                   help="the voice picker's saved voices (default: $SPEAKER_SAMPLES_DIR, else ~/.cache/gepard-demo/voices: "
                        "the speech server's too); on a public page each visitor has their own, under visitors/")
    p.add_argument("--server-url", default=None,
                   help="stream from a served model (vLLM-Omni or `python -m gepard_demo serve`) at this URL "
                        "instead of loading one here; the controls the server fixes are disabled")
    return p


def traffic_from_args(args: argparse.Namespace, places: int) -> TrafficSettings:
    """How visitors share the page: --per-client (default half the places), --trusted-proxies,
    --max-text-chars (default: 2000 on a public page, a chapter elsewhere)."""
    changes = {"trusted_proxies": args.trusted_proxies,
               "max_text_chars": args.max_text_chars or (MAX_TEXT_CHARS if args.public else CHAPTER_CHARS)}
    if args.per_client is not None:
        changes["per_client"] = args.per_client
    return TrafficSettings.for_batch(places, **changes)


def saved_voice_settings(args: argparse.Namespace, env: Mapping[str, str]) -> SavedVoiceSettings:
    """The picker's libraries: one per visitor on a public page, and on any page bound to an
    address other than loopback (anyone who reaches it is a visitor: one shared library would let
    each delete the others' voices); the one library of --voices-dir on this machine's own page."""
    from gepard_demo.ui.page.saved_voices import SavedVoiceSettings

    per_visitor = args.public or not is_loopback(args.host)
    if per_visitor and not args.public:
        print(f"Saved voices: this page listens on {args.host}, not loopback, so each visitor has voices of "
              "their own (as with --public)", file=sys.stderr, flush=True)
    return SavedVoiceSettings(args.voices_dir, per_visitor=per_visitor, secret=env.get("GEPARD_VISITOR_SECRET") or None)


def is_loopback(host: str) -> bool:
    """Whether an address to listen on is reachable from this machine alone."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def caption_settings(args: argparse.Namespace) -> Any:
    """The captions' aligner settings (None: --no-captions)."""
    if not args.captions:
        return None
    from gepard_demo.alignment.settings import AlignmentSettings

    return AlignmentSettings(weights=args.caption_weights)


def main_served(args: argparse.Namespace) -> None:
    """The page in front of a served model: no local model, no Eval tab."""
    from gepard_demo.serving.client import SpeechServerError
    from gepard_demo.ui.hosts.served import load_served_host
    from gepard_demo.ui.server import build_app, serve

    try:
        host = load_served_host(args.server_url)
    except SpeechServerError as exc:
        sys.exit(f"error: {exc}. Start the server first (vLLM-Omni: see docs/DEPLOY.md).")
    fixed = host.fixed_settings()
    sampling, stream = fixed if fixed else (SamplingSettings(), DEMO_STREAM)
    print(f"Serving the page in front of {host.info.name!r} at {host.url}", file=sys.stderr, flush=True)
    try:
        traffic = traffic_from_args(args, 1)  # the page in front of a server runs one Generate at a time
    except SettingsError as exc:
        sys.exit(f"error: {exc}")
    demo = build_app(host, sampling.replace(seed=None), stream, traffic=traffic)
    print(f"Gepard demo on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    serve(demo.app, args.host, args.port, demo.blocks, trusted_proxies=traffic.trusted_proxies)


def gpu_boundary(choice: str) -> str | None:
    """"zerogpu" on a ZeroGPU Space (auto), "emulate" when asked, else None. Imports `spaces`
    first: on ZeroGPU it must patch torch before anything touches CUDA."""
    if choice == "emulate":
        return "emulate"
    if choice == "auto":
        from gepard_demo.zerogpu.startup import zerogpu_space

        if zerogpu_space():
            return "zerogpu"
    return None


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import logging

    # One line per event (a refused request says why in one line; real faults keep their traceback).
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.server_url:
        return main_served(args)
    try:
        batching = batching_from_args(args)  # a bad --max-batch is refused before anything loads
        traffic = traffic_from_args(args, batching.max_batch)
    except SettingsError as exc:
        sys.exit(f"error: {exc}")
    boundary = gpu_boundary(args.zerogpu)  # before torch: see gpu_boundary
    import torch

    from gepard_demo.speed.cuda_check import CudaReport
    from gepard_demo.speed.flags import speed_for
    from gepard_demo.speed.select import apply_codec_speed, apply_speed, load_dtype
    from gepard_demo.speed.settings import SpeedError
    from gepard_demo.ui.hosts.model_host import engine_loader_for, load_model_host
    from gepard_demo.ui.server import build_app, serve

    cuda = CudaReport.here(zerogpu=boundary == "zerogpu")
    device = args.device or ("cuda" if cuda.usable else "cpu")
    try:
        dtype = load_dtype(device, args.precision)  # checked against the device before any weight loads
    except SpeedError as exc:
        sys.exit(f"error: {exc}")
    gpu_name = torch.cuda.get_device_name(device) if device.startswith("cuda") else None
    print(f"Start-up: {cuda.line(device, dtype, gpu_name)}", file=sys.stderr, flush=True)
    print(f"Loading model {args.model!r} on {device} ({dtype} backbone, fp32 heads) ...", file=sys.stderr, flush=True)
    from gepard_demo.text.front_end import configure, default_cache_dir

    configure(default_cache_dir(args.cache_dir))  # NeMo's compiled grammars beside tiny (make setup builds them)
    host = load_model_host(args.model, cache_dir=args.cache_dir, engine_loader=engine_loader_for(device, dtype))
    if cuda.problem():
        host.notices.append(f"⚠️ **This machine has an NVIDIA GPU, but PyTorch cannot use it, so the model runs on "
                            f"the CPU:** {cuda.problem()}.")
    if host.fallback_reason:
        print(f"Could not load {args.model!r}: {host.fallback_reason}\n"
              f"Serving the random-weight 'tiny' model instead (it makes noise).", file=sys.stderr, flush=True)
    # The fastest path that passes the fidelity guard here (printed), or what the flags ask for.
    speed = speed_for(host.engine, device, args.precision, args.threads, args.pipeline, args.codec_precision,
                      args.cuda_graphs)
    # Behind a GPU boundary (ZeroGPU) CUDA is the GPU calls' alone: their worker captures the decode
    # step's graphs in its first call and keeps them while it stays warm.
    host.engine = apply_speed(host.engine, speed, warm=boundary is None)
    host.codec = apply_codec_speed(host.codec, speed)
    if boundary is None:
        print(f"Warm-up synthesis took {host.warm_up(DEMO_STREAM):.1f} s ({torch.get_num_threads()} torch threads)",
              file=sys.stderr, flush=True)
        host.batch(batching)
        print(f"Batching: up to {batching.max_batch} visitors decode together ({batching.admission} admission)",
              file=sys.stderr, flush=True)
    else:
        from gepard_demo.ui.hosts.gpu_host import GpuHost

        # No warm-up: CUDA is the GPU calls' alone. --max-batch: how many visitors' calls run at once.
        host = GpuHost.around(host, boundary, concurrency=batching.max_batch)
        print(f"GPU calls: {host.gpu.name} (every use of the GPU is one call)", file=sys.stderr, flush=True)
    eval_tab, eval_tab_error = (None, None) if args.no_eval_tab else find_eval_tab()
    if eval_tab is not None and args.public:
        from eval.ui.common import EvalLimits

        eval_tab = functools.partial(eval_tab, limits=EvalLimits.public())
    demo = build_app(host, stream=DEMO_STREAM, eval_tab=eval_tab, eval_tab_error=eval_tab_error, traffic=traffic,
                     captions=caption_settings(args), saved_voices=saved_voice_settings(args, os.environ))
    if boundary == "zerogpu":
        from gepard_demo.zerogpu.startup import report_startup

        report_startup()  # after every @spaces.GPU wrapper exists and the weights are placed
    print(f"Gepard demo on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    serve(demo.app, args.host, args.port, demo.blocks, trusted_proxies=traffic.trusted_proxies)


if __name__ == "__main__":
    main()
