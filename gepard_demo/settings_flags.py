"""Command-line flags for every sampling and streaming setting, shared by all CLIs, derived from
the settings' own declarations (declare.declared: each field's Text says how it reads and writes).

A flag left out is absent from the namespace (argparse.SUPPRESS), meaning "not given": the settings
start from a base (the checkpoint's defaults, or a resumed run's saved settings) and only given
flags change them. `setting_args` writes settings back as flags (a take's synth line).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from .declare import declared, switch, values_of
from .settings import FeedSettings, SamplingSettings, SettingsError, StreamSettings
from .host_settings import ADMISSION_RULES, BatchingSettings, ServerSettings


def _flag_type(name: str, read):
    """A setting's Text.read as an argparse type: a bad value is a usage error naming the setting."""

    def parse(text: str):
        try:
            return read(text)
        except SettingsError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} cannot be {text!r}") from None

    return parse


def _add_flags(group, cls) -> None:
    for name, text in declared(cls).items():
        flag = "--" + name.replace("_", "-")
        if switch(cls, name):
            group.add_argument(flag, action="store_true", default=argparse.SUPPRESS, help=text.help)
        else:
            group.add_argument(flag, type=_flag_type(name, text.read), default=argparse.SUPPRESS, choices=text.choices,
                               metavar=text.metavar, help=text.help)


def add_settings_flags(p: argparse.ArgumentParser) -> None:
    """A flag for each declared sampling and stream setting (declare.declared); a flag left out
    leaves the base's value."""
    _add_flags(p.add_argument_group("sampling (SamplingSettings; unset: the checkpoint's / saved defaults)"),
               SamplingSettings)
    _add_flags(p.add_argument_group("stream (StreamSettings)"), StreamSettings)


def add_feed_flags(p: argparse.ArgumentParser) -> None:
    """--text-arrival and --words-per-s (FeedSettings): the text written word by word, as a
    language model writes it (synth, and a take's synth line)."""
    _add_flags(p.add_argument_group("text arrival (FeedSettings)"), FeedSettings)


def feed_from_args(args: argparse.Namespace) -> FeedSettings:
    given = vars(args)
    return FeedSettings(**{k: given[k] for k in declared(FeedSettings) if k in given})


def settings_from_args(
    args: argparse.Namespace, base_sampling: SamplingSettings, base_stream: StreamSettings
) -> tuple[SamplingSettings, StreamSettings]:
    """The base settings with the given flags applied, validated (SettingsError names the bad one)."""
    given = vars(args)
    samp = {k: given[k] for k in declared(SamplingSettings) if k in given}
    strm = {k: given[k] for k in declared(StreamSettings) if k in given}
    return base_sampling.replace(**samp), base_stream.replace(**strm)


def setting_args(sampling: SamplingSettings, stream: StreamSettings, feed: FeedSettings | None = None) -> list[str]:
    """The flags that give exactly these settings (a take's synth line): every declared setting,
    a true switch as itself, a value written as nothing (cfg_frames unset) left out; the text's
    arrival only when it was written as it came."""
    args: list[str] = []
    for settings in (sampling, stream, feed if feed is not None and feed.rate is not None else None):
        if settings is None:
            continue
        for name, value in values_of(settings, declared(type(settings))).items():
            text, flag = declared(type(settings))[name], "--" + name.replace("_", "-")
            if isinstance(value, bool):
                args += [flag] if value else []
            elif (written := text.write(value)) is not None:
                args += [flag, written]
    return args


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
                            codec_batching=args.codec_batching, look_ahead=args.look_ahead)


def add_server_flags(p: argparse.ArgumentParser) -> None:
    """vLLM's server flags we take (ServerSettings): the served name, the API key and CORS."""
    _add_flags(p.add_argument_group("access (ServerSettings: vLLM's server flags)"), ServerSettings)


def server_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ServerSettings:
    """The given server flags; an API key not given is $VLLM_API_KEY's, as vLLM reads it (the flag
    wins; an empty one is none)."""
    given = {k: v for k, v in vars(args).items() if k in declared(ServerSettings)}
    given.setdefault("api_key", environ.get("VLLM_API_KEY") or None)
    return ServerSettings(**given)
