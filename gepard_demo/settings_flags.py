"""Command-line flags for every sampling and streaming setting, shared by all CLIs.

Each flag defaults to None, meaning "not given": the settings start from a base (the
checkpoint's defaults, or a resumed run's saved settings) and only given flags change them.
"""

from __future__ import annotations

import argparse

from .settings import (
    ADMISSION_RULES,
    DECODE_MODES,
    BatchingSettings,
    SamplingSettings,
    SettingsError,
    StreamSettings,
    parse_force_stop,
)


def _force_stop_flag(text: str) -> int | str | None:
    """--force-stop-frames: settings.parse_force_stop, its error as argparse reports one."""
    try:
        return parse_force_stop(text)
    except SettingsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# Flags whose "off" is a value of its own (so None cannot mean "not given" for them).
_OFF = object()

# The seed is not here: each CLI means something of its own by --seed (one request's seed,
# a server's default, an evaluation run's base seed).
SAMPLING_FLAGS = {
    "temperature": float,
    "top_k": int,
    "stop_threshold": float,
    "max_frames": int,
    "cfg_scale": float,  # classifier-free guidance weight, 1 = off
    "cfg_frames": int,  # guide only the first N frames (unset: all)
    "repetition_penalty": float,  # the authors' guard against loops, 1 = off (facts §15)
    "repetition_window": int,  # the penalty's window of recent frames, 0 = all history
}
STREAM_FLAGS = {"first_chunk_frames": int, "chunk_frames": int, "lookback_frames": int, "fade_ms": float, "silence_ms": float}


def add_settings_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling (SamplingSettings; unset: the checkpoint's / saved defaults)")
    for name, typ in SAMPLING_FLAGS.items():
        g.add_argument("--" + name.replace("_", "-"), type=typ, default=None)
    g.add_argument("--greedy", action="store_true", default=None, help="argmax instead of sampling")
    g.add_argument("--force-stop-frames", type=_force_stop_flag, default=_OFF, metavar="N|auto|off",
                   help="end a run at N frames whatever the stop head says; auto: 4 x the text's expected frames, "
                        "clamped to [80, 300] (the authors' rollout cap); off: no force stop")
    g = p.add_argument_group("stream (StreamSettings)")
    for name, typ in STREAM_FLAGS.items():
        g.add_argument("--" + name.replace("_", "-"), type=typ, default=None)
    g.add_argument("--decode-mode", choices=DECODE_MODES, default=None)


def settings_from_args(
    args: argparse.Namespace, base_sampling: SamplingSettings, base_stream: StreamSettings
) -> tuple[SamplingSettings, StreamSettings]:
    """The base settings with the given flags applied, validated (SettingsError names the bad one)."""
    samp = {k: getattr(args, k) for k in [*SAMPLING_FLAGS, "greedy"] if getattr(args, k) is not None}
    if getattr(args, "force_stop_frames", _OFF) is not _OFF:
        samp["force_stop_frames"] = args.force_stop_frames
    strm = {k: getattr(args, k) for k in [*STREAM_FLAGS, "decode_mode"] if getattr(args, k) is not None}
    return base_sampling.replace(**samp).validate(), base_stream.replace(**strm).validate()


def add_batching_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("batching (BatchingSettings: several callers on one engine)")
    g.add_argument("--max-batch", type=int, default=BatchingSettings.max_batch,
                   help="requests decoding together (vLLM-Omni's deploy file: max_num_seqs 4); more wait in a queue")
    g.add_argument("--admission", choices=ADMISSION_RULES, default=BatchingSettings.admission,
                   help="realtime: a newcomer joins only while the running streams stay at or above real time "
                        "(measured step and codec times; on a GPU up to the cap); cap: up to --max-batch regardless")
    g.add_argument("--codec-batching", action=argparse.BooleanOptionalAction, default=BatchingSettings.codec_batching,
                   help="decode the streams' lined-up codec chunks in one call (exact state per stream)")
    g.add_argument("--look-ahead", type=int, default=BatchingSettings.look_ahead, metavar="SEGMENTS",
                   help="later segments of a long text generated ahead of the one playing, as rows of the running "
                        "batch (0: one after another)")


def batching_from_args(args: argparse.Namespace) -> BatchingSettings:
    return BatchingSettings(max_batch=args.max_batch, admission=args.admission,
                            codec_batching=args.codec_batching, look_ahead=args.look_ahead).validate()
