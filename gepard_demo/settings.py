"""Per-request settings, passed explicitly from the UI / CLI / eval down to the engine (how a
host serves them, batching and the page's traffic: host_settings.py).

Nothing below reads environment variables: the entry points (app.py, the CLIs) turn flags
and env vars into these dataclasses once, and every layer below receives them.
"""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass
from typing import Any, TypeGuard

from .declare import Control, Declared, Range, declared, in_effect, out_of_range, served_as, setting, values_of
from .text.front_end import NEMO, TEXT_NORMALIZATIONS, library_available
from .text.lexicon import LexiconError, parse_cached
# 4096 frames is about 190 s: the same upper bound vLLM-Omni's speech endpoint accepts for
# max_new_tokens.
MAX_FRAMES_LIMIT = 4096
# Guidance past ~5 is far outside what the authors use (2-3); 10 leaves room to explore.
MAX_CFG_SCALE = 10.0
# Gepard's widest FSQ head has 8 levels (facts §3): a larger top_k keeps every level, as 0 does.
MAX_TOP_K = 8
# The authors' runner calls a repetition penalty of 1.1-1.3 typical (facts §15). At 2 every code of
# the window has its positive logit halved and its negative one doubled, on all 32 heads: with the
# window's default 32 frames that reaches most of a head's 6-8 levels, so above 2 the penalty mostly
# reshuffles which levels are left rather than discouraging a loop. 2 leaves room to explore past
# the authors' range, as MAX_CFG_SCALE does for guidance.
MAX_REPETITION_PENALTY = 2.0
# force_stop_frames's text-scaled form (gepard_demo/model/guards/guardrails.py), and how "no force stop"
# is written wherever the setting is text (a flag, the page's box, an eval form).
AUTO = "auto"
OFF = "off"


class SettingsError(ValueError):
    """A setting outside its allowed range. The message names the setting and the range; `field`
    is the setting's name where the error is about one (the server's 400 `param`, the page's
    highlighted control), None where it is about several or none."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field

    def __reduce__(self):  # keeps the field across a process boundary (ZeroGPU's calls pickle errors)
        return type(self), (str(self), self.field)


def check_field(cond: bool, field: str, message: str) -> None:
    """Refuse with a SettingsError naming `field` unless cond."""
    if not cond:
        raise SettingsError(message, field)


def check_ranges(settings: Declared) -> None:
    """Refuse, naming the field, the first value outside its declared Range (declare.py)."""
    if (bad := out_of_range(settings)) is not None:
        raise SettingsError(bad[1], bad[0])


def parse_force_stop(value) -> int | str | None:
    """force_stop_frames from text or a number, as every surface takes it: "off" (or empty, or
    None) -> None, "auto" -> AUTO, a whole number of frames -> int. Its range is `validate`'s."""
    if value is None or isinstance(value, str) and value.strip().lower() in ("", OFF, "none"):
        return None
    if isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    wrong = SettingsError(f"force_stop_frames must be {OFF!r}, {AUTO!r} or a whole number of frames, got {value!r}",
                          "force_stop_frames")
    if isinstance(value, bool):
        raise wrong
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise wrong from None
    if not number.is_integer():
        raise SettingsError(f"force_stop_frames must be a whole number of frames, got {value!r}", "force_stop_frames")
    return int(number)


def force_stop_text(value: int | str | None) -> str:
    """force_stop_frames as text (the page's box, a command line): "off", "auto" or the number."""
    return OFF if value is None else str(value)


def _g(x: float) -> str:
    return f"{x:g}"


def _read_bool(text: str) -> bool:
    word = str(text).strip().lower()
    if word not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        raise ValueError(f"{text!r} is not true/false")
    return word in ("true", "1", "yes", "on")


def _read_unset_int(text: str) -> int | None:
    return None if str(text).strip().lower() in ("", "none", OFF) else int(text)


def _read_entries(text) -> str:
    """A text setting that may be left empty (the page's empty box may come back as None)."""
    return "" if text is None else str(text).strip()


def _write_unset(value) -> str | None:
    return None if value is None else str(value)


def _real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def is_whole(x: object) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class SamplingSettings:
    """How frames are drawn and when generation ends (facts §3).

    temperature: divides every head's logits before Gumbel-max sampling.
    greedy: argmax instead of sampling (temperature and top_k are then ignored).
    top_k: keep only the k best logits of each head (0 = all levels).
    stop_threshold: stop when sigmoid(stop_head(h)) > threshold, from the second step on.
    max_frames: frame budget; hitting it ends a runaway and is reported as one.
    seed: the request's own noise generator; None draws a fresh random seed.
    cfg_scale: classifier-free guidance weight w (facts §9); 1.0 = off. Per head, in fp32 before
        temperature and top-k, the logits become u + w * (c - u), c from the prompt, u from the
        same speaker prefix with the text left out ([prefix, SOT, EOT, SOS]). Typical 2-3.
    cfg_frames: guide only the first N frames (the onset, where derails start); None = all.
        Past N the unconditional branch is no longer run.
    repetition_penalty / repetition_window: the authors' runner's guard against loops (facts §15):
        per head, every code among the last `repetition_window` committed frames (0 = all of them)
        has its fp32 logit divided by the penalty when positive, multiplied when not, after
        guidance and before temperature and top-k. 1.0 = off (the runner's default).
    force_stop_frames: a hard stop once the utterance has this many frames, whatever the stop head
        says (the runner's guardrail); "auto" = 4 x the text's expected frames clamped to [80, 300]
        (the authors' rollout cap, per segment of long text); None = off. A run it ends reports
        `force_stop` (and counts as a runaway the guard caught). The frame budget still applies:
        where both fall on the same frame the budget is what ended it, as in the runner.
    text_repetition: the prompt repeats a short text (facts §2), as the model was trained; False
        gives the authors' no-repetition baseline (eval's `--text-repetition off`).
    text_normalization: how the text front end reads the text before the prompt (gepard_demo/text:
        "off" as written, "rules" our own layer, "nemo" ours then NeMo's grammars). Off by default
        until the real weights show that normalising helps.
    lexicon_entries: this request's pronunciations, applied before the normaliser: "written =
        spoken" entries (a ";" or a new line between them) or a W3C PLS document with <alias>es
        (gepard_demo/text/lexicon.py); they extend and override the server's `--lexicon`.
    """

    # The seed and text_repetition carry no Text: each CLI means something of its own by --seed (one
    # request's seed, a server's default, a run's base seed), and only eval's run takes
    # --text-repetition (an experiment, not a sweep axis). Field order is the page's within a group.
    temperature: float = setting(0.3, kind=float, read=float, write=_g, help="divides every head's logits before sampling",
                                 tag="T", sweep=(0.3, 0.7, 1.0), range=Range(0.0, 5.0, lo_open=True),
                                 page=Control("sampling", "Temperature", "temperature", step=0.05))
    # Up to the widest head's levels (FSQ_LEVELS): a larger k keeps every level, as 0 does.
    top_k: int = setting(0, kind=int, read=int, help="keep each head's k best levels (0 = all)", tag="k",
                         range=Range(0, MAX_TOP_K),
                         page=Control("sampling", "Top-k (0 = off; heads have 6-8 levels)", "top-k"))
    greedy: bool = setting(False, kind=bool, read=_read_bool, help="argmax instead of sampling", tag="greedy",
                           page=Control("sampling", "Greedy (argmax; ignores temperature and top-k)", "greedy",
                                        widget="checkbox"))
    stop_threshold: float = setting(0.5, kind=float, read=float, write=_g,
                                    help="stop once the stop head's probability passes it", tag="S", sweep=(0.3, 0.5, 0.7),
                                    range=Range(0.0, 1.0, lo_open=True, hi_open=True),
                                    page=Control("sampling", "Stop threshold", "stop-threshold", step=0.01))
    # A text box, not a number field: a browser's numbers are doubles, which round a seed above 2**53
    # (an eval row's seeds are 63-bit) to another seed; the page parses it exactly.
    # vLLM-Omni's range; torch seeds a generator with the value's two's complement.
    seed: int | None = setting(None, kind=int | None, served="request", tag="seed", range=Range(-(2**63), 2**63 - 1),
                               page=Control("sampling", "Seed", "seed", widget="seed"))
    max_frames: int = setting(1000, kind=int, read=int, help="the frame budget: a run that reaches it is a runaway",
                              metavar="FRAMES", served="request", range=Range(1, MAX_FRAMES_LIMIT),
                              page=Control("sampling", "Max frames per text segment (21.5 per second; text over 400 "
                                           "characters is split)", "max-frames"))
    cfg_scale: float = setting(1.0, kind=float, read=float, write=_g, help="classifier-free guidance weight, 1 = off",
                               served="guidance", range=Range(0.0, MAX_CFG_SCALE),
                               page=Control("voice", "CFG scale (1 = off; 2-3 helps short phrases)", "cfg-scale",
                                            step=0.1))
    cfg_frames: int | None = setting(None, kind=int | None, read=_read_unset_int, write=_write_unset,
                                     help="guide only the first N frames (unset: all)", metavar="FRAMES",
                                     served="guidance", needs="cfg_scale", range=Range(1, MAX_FRAMES_LIMIT),
                                     page=Control("voice", "Guide only the first N frames (0 = every frame)",
                                                  "cfg-frames", unset=0))
    repetition_penalty: float = setting(1.0, kind=float, read=float, write=_g,
                                        help="the authors' guard against loops, 1 = off (typical 1.1-1.3)",
                                        served="guardrails", range=Range(1.0, MAX_REPETITION_PENALTY),
                                        page=Control("guardrails", "Repetition penalty (1 = off; the authors' typical "
                                                     "1.1-1.3)", "repetition-penalty", step=0.05))
    repetition_window: int = setting(32, kind=int, read=int, help="the penalty's window of recent frames, 0 = all history",
                                     metavar="FRAMES", served="guardrails", needs="repetition_penalty",
                                     range=Range(0, MAX_FRAMES_LIMIT),
                                     page=Control("guardrails", "Penalty window: recent frames whose "
                                                  "codes are penalized (0 = all)", "repetition-window"))
    force_stop_frames: int | str | None = setting(
        None, kind=int | str | None, read=parse_force_stop, write=force_stop_text,
        help="end a run at N frames whatever the stop head says; auto: 4 x the text's expected frames, clamped to "
        "[80, 300] (the authors' rollout cap); off: no force stop", metavar="N|auto|off", served="guardrails",
        page=Control("guardrails", "Force stop at frame: off, auto (4 x the text's expected frames, 80-300) or a number",
                     "force-stop", widget="text"))
    text_repetition: bool = True
    text_normalization: str = setting(
        OFF, kind=str, read=str, choices=TEXT_NORMALIZATIONS, served="normalization",
        help="how the text is read before the prompt: off = as written; rules = numbers, money, times, phone "
        "numbers by our rules; nemo = ours, then NeMo's grammars (`python -m gepard_demo normalize` previews it)",
        page=Control("reading", "Text normalization (off until the real weights show it helps)",
                     "text-normalization", widget="radio"))
    lexicon_entries: str = setting(
        "", kind=str, read=_read_entries, write=lambda v: v or None, served="normalization", metavar="ENTRIES",
        help="pronunciations, before normalisation: 'written = spoken' entries separated by ';' or a PLS document",
        page=Control("reading", "Pronunciations: written = spoken, separated by ';' (or a W3C PLS document)",
                     "lexicon", widget="text"))

    @property
    def guided(self) -> bool:
        """Whether any frame runs the unconditional branch."""
        return self.cfg_scale != 1.0

    @property
    def penalized(self) -> bool:
        """Whether the repetition penalty changes any logit."""
        return self.repetition_penalty != 1.0

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "SamplingSettings":
        check_ranges(self)
        f = self.force_stop_frames
        check_field(
            f is None or f == AUTO or is_whole(f),
            "force_stop_frames", f"force_stop_frames must be unset (off), {AUTO!r} or a whole number of frames, got {f!r}",
        )
        check_field(
            not is_whole(f) or 1 <= f <= self.max_frames,
            "force_stop_frames", f"force_stop_frames must be in [1, max_frames = {self.max_frames}], got {f}",
        )
        check_field(isinstance(self.text_repetition, bool), "text_repetition", f"text_repetition must be true or false, got {self.text_repetition!r}")
        check_field(self.text_normalization in TEXT_NORMALIZATIONS, "text_normalization",
                    f"text_normalization must be one of {TEXT_NORMALIZATIONS}, got {self.text_normalization!r}")
        check_field(self.text_normalization != NEMO or library_available(), "text_normalization",
                    "text_normalization 'nemo' needs nemo_text_processing, which is not installed here "
                    "(pip install -r requirements.txt)")
        try:
            parse_cached(self.lexicon_entries, "lexicon_entries")
        except LexiconError as e:
            raise SettingsError(str(e), "lexicon_entries") from None
        return self

    def replace(self, **changes) -> "SamplingSettings":
        return dataclasses.replace(self, **changes)

    def with_concrete_seed(self) -> "SamplingSettings":
        """These settings with a seed: an unseeded request still gets one, so it can be replayed.

        Drawn below 2**53 so it survives a trip through JSON and a browser's number field.
        """
        return self if self.seed is not None else self.replace(seed=secrets.randbelow(2**53))


# Our extension fields on the speech API, by the group a server lists in /v1/models (declare.SERVED).
GUIDANCE_FIELDS = served_as(SamplingSettings, "guidance")
GUARDRAIL_FIELDS = served_as(SamplingSettings, "guardrails")
NORMALIZATION_FIELDS = served_as(SamplingSettings, "normalization")
EXTENSION_GROUPS = {"guidance": GUIDANCE_FIELDS, "guardrails": GUARDRAIL_FIELDS, "normalization": NORMALIZATION_FIELDS}


def extension_fields(sampling: SamplingSettings) -> dict[str, dict[str, Any]]:
    """Our extension fields a request with these settings carries, by group: those in effect
    (declare.in_effect), so a group that changes nothing carries none and a plain request stays
    exactly vLLM-Omni's."""
    return {group: in_effect(sampling, names) for group, names in EXTENSION_GROUPS.items()}


DECODE_MODES = ("exact", "lookback")
CHUNK_SCHEDULES = ("ramp", "fixed")  # streaming/pacing.py


@dataclass(frozen=True)
class StreamSettings:
    """How committed frames become audio chunks (facts §4-5).

    first_chunk_frames / chunk_frames: decode cadence (vLLM-Omni: 10 then 86).
    chunk_schedule: "ramp" makes each later chunk as long as the audio sent before it, up to
        chunk_frames (streaming/pacing.py); "fixed" always takes chunk_frames, as vLLM-Omni does.
    decode_mode: "exact" carries the decoder's causal state (no re-decode, equals one whole
        decode); "lookback" re-decodes lookback_frames of history per chunk, as vLLM-Omni does.
    fade_ms / silence_ms: end of speech: linear fade of the last fade_ms, then silence.
    """

    first_chunk_frames: int = setting(10, kind=int, read=int, help="frames in the first chunk", metavar="FRAMES",
                                      range=Range(1, 100), page=Control("stream", "First chunk frames", "first-chunk"))
    chunk_frames: int = setting(86, kind=int, read=int, help="frames in each later chunk (ramp: at most)",
                                metavar="FRAMES", range=Range(1, 200), page=Control("stream", "Chunk frames", "chunk"))
    chunk_schedule: str = setting("ramp", kind=str, read=str, help="ramp: each later chunk as long as the audio sent "
                                  "before it, up to chunk_frames (no gap while RTF <= ~0.5); fixed: chunk_frames each "
                                  "(vLLM-Omni)", choices=CHUNK_SCHEDULES,
                                  page=Control("stream", "Chunk schedule (ramp: no gap at RTF up to ~0.5)",
                                               "chunk-schedule", widget="radio"))
    decode_mode: str = setting("exact", kind=str, read=str, help="exact: carry the decoder's state; lookback: "
                               "re-decode history (vLLM-Omni)", choices=DECODE_MODES,
                               page=Control("stream", "Decode mode (exact = one whole decode)", "decode-mode",
                                            widget="radio"))
    lookback_frames: int = setting(8, kind=int, read=int, help="history re-decoded per chunk in lookback mode",
                                   metavar="FRAMES",
                                   range=Range(0, 64),
                                   page=Control("stream", "Lookback frames (lookback mode only)", "lookback"))
    fade_ms: float = setting(0.0, kind=float, read=float, write=_g, help="linear fade of the speech's last ms",
                             metavar="MS", range=Range(0.0, 500.0), page=Control("stream", "End fade (ms)", "fade", step=5))
    silence_ms: float = setting(0.0, kind=float, read=float, write=_g, help="silence after the speech", metavar="MS",
                                range=Range(0.0, 2000.0), page=Control("stream", "End silence (ms)", "silence", step=10))

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "StreamSettings":
        check_field(self.chunk_schedule in CHUNK_SCHEDULES, "chunk_schedule",
                    f"chunk_schedule must be one of {CHUNK_SCHEDULES}, got {self.chunk_schedule!r}")
        check_field(self.decode_mode in DECODE_MODES, "decode_mode",
                    f"decode_mode must be one of {DECODE_MODES}, got {self.decode_mode!r}")
        check_ranges(self)
        return self

    def replace(self, **changes) -> "StreamSettings":
        return dataclasses.replace(self, **changes)


TEXT_ARRIVALS = ("at once", "as written")
MAX_WORDS_PER_S = 100.0  # a fast language model's pace


@dataclass(frozen=True)
class FeedSettings:
    """How the page hands its text over: at once, or word by word at words_per_s as a language model
    writes it (10-100 a second; speech is about 2.5), each sentence starting as it closes (streaming/text_feed.py)."""

    text_arrival: str = setting("at once", kind=str, read=str, help="as written: word by word, as a language model "
                                "writes it", choices=TEXT_ARRIVALS, served="request",
                                page=Control("text", "Text arrives", "text-arrival", widget="radio"))
    words_per_s: float = setting(10.0, kind=float, read=float, write=_g, help="the pace of the writing", metavar="WORDS",
                                 served="request", range=Range(1.0, MAX_WORDS_PER_S),
                                 page=Control("text", "Words per second, as written", "words-per-s", step=1))

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "FeedSettings":
        check_field(self.text_arrival in TEXT_ARRIVALS, "text_arrival", f"text_arrival must be one of {TEXT_ARRIVALS}, got {self.text_arrival!r}")
        check_ranges(self)
        return self

    @property
    def rate(self) -> float | None:
        """Words a second as written; None when the text comes at once."""
        return self.words_per_s if self.text_arrival == "as written" else None


def fixed_by_server(sampling: SamplingSettings | None = None, stream: StreamSettings | None = None) -> str:
    """The settings a speech server fixes at its start (declared served="fixed": vLLM-Omni takes
    no `extra_params`), in words: each with its value when the server's settings are given."""
    words = []
    for cls, given in ((SamplingSettings, sampling), (StreamSettings, stream)):
        written = declared(cls)
        for name in served_as(cls, "fixed"):
            words.append(name.replace("_", " ") + ("" if given is None else f" {written[name].write(values_of(given)[name])}"))
    return ", ".join(words)
