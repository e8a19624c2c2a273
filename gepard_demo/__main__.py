"""Command line: `python -m gepard_demo synth "TEXT" -o out.wav`, `serve`, `speak`, `normalize` and `make-tiny DIR`.

The only place (with app.py) that reads GEPARD_MODEL / GEPARD_CACHE_DIR: flags and env vars become
settings dataclasses here and are passed down. (eval's CLI builds `tiny` in the default cache.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .alignment.settings import DEFAULT_WEIGHTS
from .declare import values_of
from .settings import GUARDRAIL_FIELDS, GUIDANCE_FIELDS, SettingsError, StreamSettings
from .settings_flags import (add_batching_flags, add_feed_flags, add_server_flags, add_settings_flags, batching_from_args,
                             feed_from_args, server_from_args, settings_from_args)
from .speed.flags import add_speed_flags
from .text.command import add_lexicon_flag, add_normalize_parser, read_lexicon_file

if TYPE_CHECKING:
    from .model.seams import Engine


def add_model_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=os.environ.get("GEPARD_MODEL", "tiny"),
                        help="local checkpoint dir, Hugging Face id, or 'tiny' (env GEPARD_MODEL)")
    parser.add_argument("--cache-dir", default=os.environ.get("GEPARD_CACHE_DIR"),
                        help="where 'tiny' is built (env GEPARD_CACHE_DIR; default ~/.cache/gepard-demo)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:n]")
    add_speed_flags(parser)
    parser.add_argument("--codec", default=None, help="a .nemo path or hub id (default: the model's own)")
    parser.add_argument("--codec-backend", choices=["native", "nemo"], default="native")


def cmd_make_tiny(args: argparse.Namespace) -> int:
    from gepard_demo.model.checkpoints.tiny import make_tiny

    out = make_tiny(args.dir, seed=args.seed, layout="hybrid" if args.hybrid else "full")
    print(f"wrote tiny random-weight Gepard checkpoint to {out}")
    return 0


def load_from_args(args: argparse.Namespace):
    """engine, codec, sampling and stream settings from the model / sampling / stream flags."""
    import torch

    from gepard_demo.model.engine import GepardEngine

    from .codec import load_codec
    from .speed.flags import speed_for
    from .speed.select import apply_codec_speed, apply_speed, load_dtype

    from .text.front_end import configure, default_cache_dir

    # The text front end's grammar cache beside tiny's, and the server-wide lexicon (synth, serve).
    configure(default_cache_dir(args.cache_dir), read_lexicon_file(getattr(args, "lexicon", None)))
    # Until the speed pick sets it: loading and quantizing are not worth more threads.
    torch.set_num_threads(max(1, args.threads))
    dtype = load_dtype(args.device, args.precision)
    loaded = GepardEngine.load(args.model, device=args.device, dtype=dtype, cache_dir=args.cache_dir)
    speed = speed_for(loaded, args.device, args.precision, args.threads, args.pipeline, args.codec_precision,
                      args.cuda_graphs)
    engine = apply_speed(loaded, speed)
    sampling, stream = settings_from_args(args, engine.default_sampling(), StreamSettings())
    sampling = sampling.replace(seed=args.seed)
    codec = load_codec(args.codec or engine.codec_source(), backend=args.codec_backend, device=args.device)
    codec = apply_codec_speed(codec, speed, stream)
    return engine, codec, sampling, stream


def codec_path(args: argparse.Namespace, engine: Engine) -> Path:
    """The local .nemo the codec was loaded from (the encoder for reference voices reads it too)."""
    from .codec.source import resolve_codec_source

    return resolve_codec_source(args.codec or engine.codec_source(), args.cache_dir)


def cmd_synth(args: argparse.Namespace) -> int:
    import soundfile as sf

    from gepard_demo.serving.protocol import pcm16_array
    from gepard_demo.streaming.report import PER_FRAME, run_report
    from gepard_demo.streaming.session import SynthesisSession
    from gepard_demo.streaming.seams import SessionRequest

    from gepard_demo.streaming.text_feed import write
    from gepard_demo.streaming.text_input import CHAPTER_CHARS, clean_text, read_text_file, split_text
    from gepard_demo.units import wire_float

    if (args.text is None) == (args.text_file is None):
        raise SettingsError("give the text, or --text-file FILE (a UTF-8 .txt), not both")
    text = read_text_file(args.text_file) if args.text_file else clean_text(args.text, CHAPTER_CHARS)
    batching = batching_from_args(args)
    engine, codec, sampling, stream = load_from_args(args)
    tokens = voice_row = None  # the speaker prefix (None: the default voice), and what the stats say of it
    if args.ref_audio and args.voice:
        raise SettingsError("give --ref-audio FILE or --voice NAME, not both", "voice")
    if args.ref_audio:
        from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

        prefixer = SpeakerPrefixer.for_engine(engine, codec_path(args, engine))
        speaker = prefixer.from_file(args.ref_audio)
        tokens = speaker.tokens
        voice_row = {"ref_audio": str(args.ref_audio), "ref_audio_s": round(speaker.seconds, 3),
                     "prefix_s": round(speaker.compute_s, 3)}
    elif args.voice:  # a saved voice: its prefix as the server made it at upload
        library = voice_library(args)
        saved = library.find(args.voice)
        if saved is None:
            raise SettingsError(f"no saved voice {args.voice!r} in {args.voices_dir}", "voice")
        tokens = library.prefix(args.voice)
        voice_row = {"voice": saved.name, "voice_s": round(saved.clip_s, 3)}
    feed = feed_from_args(args)
    if args.output is None:  # said before the work, so a user who meant to keep the audio can stop it
        print("synth: no -o FILE: the audio is generated for its stats and not written", file=sys.stderr)
    runner = engine
    units = len(write(text, feed.rate).units) if feed.rate is not None else len(split_text(text))
    if units > 1 and batching.look_ahead > 0:
        # A long text: its later segments run ahead in one batch beside the first (streaming/segments.py).
        from gepard_demo.batching.scheduler import BatchScheduler

        runner = BatchScheduler(engine, batching)
    session = SynthesisSession(
        runner,
        codec,
        SessionRequest(text, sampling, stream, speaker=tokens, max_text_chars=CHAPTER_CHARS, words_per_s=feed.rate),
        look_ahead=batching.look_ahead,
    )
    try:
        audio = session.run()
    finally:
        if runner is not engine:
            runner.close()
    stats = session.stats
    if args.output:
        # The speech server's int16 conversion, so `synth` and `serve` give the same samples.
        sf.write(args.output, pcm16_array(audio), codec.sample_rate, subtype="PCM_16")
    report = run_report(stats)  # frames, how it ended, the seed, segments, the probe and its traces
    traces = {k: report.pop(k) for k in PER_FRAME}  # a frame each: thousands of numbers, so a file's, not the line's
    if args.traces:
        args.traces.write_text(json.dumps(traces) + "\n", encoding="utf-8")
    row = {
        **report,
        "duration_s": wire_float(stats.audio_s),
        "ttfa_s": wire_float(stats.ttfa_s),
        "rtf": wire_float(stats.rtf),
        "model": engine.model_info.name,
        "random_weights": engine.model_info.random_weights,
        "speed": engine.model_info.speed,
        **values_of(sampling, (*GUIDANCE_FIELDS, *GUARDRAIL_FIELDS)),
    }
    row.update(voice_row or {})
    row.update(wav=str(args.output) if args.output else None, traces=str(args.traces) if args.traces else None)
    print(json.dumps(row))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gepard_demo.serving.server import build_speech_app

    # Sampling and stream settings are fixed for the server's lifetime, like vLLM-Omni's
    # gepard_config.json and env vars.
    engine, codec, sampling, stream = load_from_args(args)
    prefixer = None
    try:
        from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

        prefixer = SpeakerPrefixer.for_engine(engine, codec_path(args, engine))
    except (RuntimeError, ValueError, OSError) as exc:  # CompressorError, CodecLoadError
        print(f"voice cloning off ({exc}): ref_audio requests get a 400", file=sys.stderr, flush=True)
    aligner = None
    if args.word_timestamps:  # vLLM-Omni's --forced-aligner: the field is served only when asked for
        from gepard_demo.alignment.aligner import Aligner
        from gepard_demo.alignment.settings import AlignmentSettings

        aligner = Aligner(AlignmentSettings(weights=args.word_timestamps)).load()
        print(f"word_timestamps on ({args.word_timestamps})", file=sys.stderr, flush=True)
    voices = None
    if prefixer is not None:  # a voice is its prefix: saved voices need the compressor too
        from gepard_demo.serving.voices import VoiceShelf

        voices = VoiceShelf(voice_library(args), prefixer)
        print(f"voices: {len(voices.library.voices())} saved in {voices.library.folder}", file=sys.stderr, flush=True)
    server = server_from_args(args, os.environ)  # --api-key, else $VLLM_API_KEY, as vLLM reads it
    app = build_speech_app(engine, codec, sampling, stream, prefixer=prefixer, batching=batching_from_args(args),
                           aligner=aligner, voices=voices, server=server)
    print(f"serving {server.served_model_name or engine.model_info.name} on http://{args.host}:{args.port}/v1/audio/speech", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def cmd_speak(args: argparse.Namespace) -> int:
    """Standard input spoken as it arrives, through a server's speech WebSocket (ours or vLLM-Omni's)."""
    import asyncio

    from gepard_demo.serving.stream_client import SpeakError, speak_pieces

    config = {"split_granularity": args.split}
    config.update({k: v for k, v in (("seed", args.seed), ("max_new_tokens", args.max_new_tokens)) if v is not None})
    units = []

    async def run() -> None:
        async for unit in speak_pieces(args.server, _stdin_pieces(), **config):
            print(json.dumps({"unit": unit.index, "text": unit.text, "text_to_audio_ms": None if unit.wait_s is None
                              else round(unit.wait_s * 1000), "audio_s": round(len(unit.pcm) / unit.sample_rate, 3),
                              "error": unit.error}), file=sys.stderr)
            if args.out == "-":
                sys.stdout.buffer.write(unit.pcm.astype("<i2").tobytes())
                sys.stdout.buffer.flush()
            units.append(unit)

    try:
        asyncio.run(run())
    except SpeakError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out not in (None, "-") and units:
        import numpy as np
        import soundfile as sf

        sf.write(args.out, np.concatenate([u.pcm for u in units]), units[0].sample_rate, subtype="PCM_16")
    return 0


async def _stdin_pieces():
    """Standard input as it arrives (a pipe gives what the writer flushed), decoded as UTF-8."""
    import asyncio
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    loop = asyncio.get_running_loop()
    while data := await loop.run_in_executor(None, os.read, sys.stdin.fileno(), 4096):
        if text := decoder.decode(data):
            yield text
    if tail := decoder.decode(b"", final=True):
        yield tail


def add_voice_args(parser: argparse.ArgumentParser, server: bool = False) -> None:
    """The saved voices' folder (and, on a server, vLLM-Omni's cap and registration policy), the
    defaults read from vLLM-Omni's environment variables here, at the edge."""
    from gepard_demo.voice.library import MAX_VOICES, POLICIES, default_voices_dir

    parser.add_argument("--voices-dir", type=Path, default=default_voices_dir(os.environ),
                        help="saved voices' folder (default: $SPEAKER_SAMPLES_DIR, else ~/.cache/gepard-demo/voices)")
    if not server:  # one reads voices, never saves one
        parser.set_defaults(max_voices=MAX_VOICES, voice_policy="overwrite")
        return
    parser.add_argument("--max-voices", type=int, default=int(os.environ.get("SPEAKER_MAX_UPLOADED") or MAX_VOICES),
                        help="saved voices at most (default: $SPEAKER_MAX_UPLOADED, else 1000)")
    parser.add_argument("--voice-policy", choices=POLICIES,
                        default=(os.environ.get("VLLM_OMNI_SPEAKER_REGISTRATION_POLICY") or "overwrite").lower(),
                        help="a new upload of a saved name: replace it, or refuse it until deleted "
                             "(default: $VLLM_OMNI_SPEAKER_REGISTRATION_POLICY, else overwrite)")


def voice_library(args: argparse.Namespace):
    """The saved voices the flags name; "default" is Gepard's one built-in voice, so no saved one shadows it."""
    from gepard_demo.serving.protocol import DEFAULT_VOICE
    from gepard_demo.voice.library import VoiceLibrary

    return VoiceLibrary(args.voices_dir, args.max_voices, args.voice_policy, reserved=(DEFAULT_VOICE,))


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and its flags (tests/docs/test_docs.py checks the docs' commands against it)."""
    parser = argparse.ArgumentParser(prog="python -m gepard_demo", description="Gepard-1.0 TTS on CPU or one GPU")
    sub = parser.add_subparsers(dest="cmd", required=True)

    tiny = sub.add_parser("make-tiny", help="write a tiny random-weight checkpoint in the published layout")
    tiny.add_argument("dir", type=Path)
    tiny.add_argument("--seed", type=int, default=0)
    tiny.add_argument("--hybrid", action="store_true",
                      help="the second test layout: 3 Gated-DeltaNet + 1 full-attention layer, no voice cloning")
    tiny.set_defaults(func=cmd_make_tiny)

    synth = sub.add_parser("synth", help="synthesize one text into -o FILE; prints one JSON line of stats (the "
                                         "per-frame traces: --traces FILE)")
    synth.add_argument("text", nargs="?", default=None)
    synth.add_argument("--text-file", type=Path, default=None,
                       help="read the text from a UTF-8 .txt file (a chapter: up to 50,000 characters)")
    synth.add_argument("-o", "--output", type=Path,
                       help="WAV file to write (without it the audio is made for its stats only, and it says so)")
    synth.add_argument("--traces", type=Path, default=None, metavar="FILE",
                       help="write the per-frame traces (the probe's entropy and nll, one number a frame) to FILE as JSON; "
                            "the stats line keeps their summary (entropy_onset, entropy_settled, entropy_drop)")
    add_model_args(synth)
    add_settings_flags(synth)
    add_feed_flags(synth)  # the text written word by word, as a language model writes it
    add_lexicon_flag(synth)
    add_batching_flags(synth)  # a long text's segments ahead: --look-ahead, and the batch they share
    synth.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed in the stats")
    synth.add_argument("--ref-audio", type=Path, default=None,
                       help="speak in this voice: a 3-15 s recording (WAV, FLAC, OGG, MP3; any rate or channels)")
    synth.add_argument("--voice", default=None, help="speak in this saved voice (its name in --voices-dir)")
    add_voice_args(synth)
    synth.set_defaults(func=cmd_synth)

    serve = sub.add_parser("serve", help="vLLM-Omni's POST /v1/audio/speech (subset) on our engine; "
                                          "sampling and stream flags are fixed for the server's lifetime")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (loopback by default)")
    serve.add_argument("--port", type=int, default=8091)
    serve.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    add_model_args(serve)
    add_settings_flags(serve)  # --max-frames: the default max_new_tokens
    add_lexicon_flag(serve)  # the server-wide lexicon
    add_batching_flags(serve)
    serve.add_argument("--seed", type=int, default=None, help="seed for requests that send none (default: a fresh one each)")
    add_voice_args(serve, server=True)
    add_server_flags(serve)  # vLLM's --served-model-name, --api-key, CORS
    serve.add_argument("--word-timestamps", nargs="?", const=DEFAULT_WEIGHTS, default=None, metavar="WEIGHTS",
                       help=f"serve vLLM-Omni's word_timestamps field with our aligner (Whisper weights: {DEFAULT_WEIGHTS} "
                            "when no value, tiny.en, base, or a path); off by default, as vLLM-Omni without "
                            "--forced-aligner")
    serve.set_defaults(func=cmd_serve)

    speak = sub.add_parser("speak", help="speak standard input as it arrives through a server's speech WebSocket "
                                          "(ours or vLLM-Omni's): `some-llm | python -m gepard_demo speak --server URL`")
    speak.add_argument("--server", required=True, help="the server's address, e.g. http://127.0.0.1:8091")
    speak.add_argument("-o", "--out", default=None,
                       help="WAV file to write at the end, or - for raw s16le PCM on stdout as each unit comes "
                            "(| aplay -r 22050 -f S16_LE)")
    speak.add_argument("--split", choices=["sentence", "clause", "none"], default="sentence",
                       help="where a unit ends (vLLM-Omni's split_granularity); none: all of the input at its end")
    speak.add_argument("--seed", type=int, default=None, help="unit k takes the seed a long text's segment k takes")
    speak.add_argument("--max-new-tokens", type=int, default=None, help="frames per unit at most")
    speak.set_defaults(func=cmd_speak)

    normalize = add_normalize_parser(sub)
    normalize.add_argument("--cache-dir", default=os.environ.get("GEPARD_CACHE_DIR"),
                           help="the demo's cache (env GEPARD_CACHE_DIR; default ~/.cache/gepard-demo)")
    normalize.set_defaults(func=cmd_normalize)
    return parser


def cmd_normalize(args: argparse.Namespace) -> int:
    from .text.command import run

    return run(args, args.cache_dir)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (SettingsError, ValueError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
