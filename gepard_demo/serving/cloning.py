"""The speech server's voice-cloning and guidance fields, parsed and checked apart from the
protocol so the server only wires them in.

vLLM-Omni's cloning fields (its Qwen3-TTS "Base" task; vLLM-Omni 0.30 refuses them for Gepard):
- `ref_audio`: the reference recording as base64 or a data URL (`data:audio/wav;base64,...`);
  any format soundfile (or an ffmpeg on PATH) reads, any rate and channel count, 3-15 s of
  sound (reference_audio.py says why). URLs are not fetched.
- `ref_text`: accepted and ignored: Gepard's compressor takes only the audio (the response
  says so in the `X-Gepard-Ref-Text: ignored` header).
- `task_type`: accepted when it is "Base" (vLLM-Omni's name for cloning), refused otherwise.

Our extension fields (not in vLLM-Omni) are the sampling settings declared served "guidance"
(classifier-free guidance), "guardrails" (the authors' guards, gepard_demo/model/guards/guardrails.py)
or "normalization" (the text front end, gepard_demo/text) in settings.py, each read as its declaration reads it (`EXTENSION_FIELDS`, listed in
/v1/models). Each is checked against the request's own frame budget (max_new_tokens), and a bad
one is a 400 whose `param` names it.
"""

from __future__ import annotations

from gepard_demo.declare import declared, kind_of, takes_a_word, whole_number
from gepard_demo.serving.protocol import EXTENSION_FIELDS, GEPARD_RULES, FieldRule
from gepard_demo.settings import AUTO, SamplingSettings, SettingsError
from gepard_demo.voice.reference_audio import ReferenceAudioError, decode_base64_audio

ACCEPTED_CLONING_FIELDS = ("ref_audio", "ref_text", "task_type")  # with a compressor to clone with
# EXTENSION_FIELDS (ours, always accepted) is protocol.py's: its unknown-field error lists them too.


def request_rules(cloning: bool, voices: bool = False) -> tuple[FieldRule, ...]:
    """vLLM-Omni's Gepard refusals, less the cloning fields we serve when the model can clone, and
    less its one-voice rule where the server keeps saved voices (the service checks the name)."""
    served = (ACCEPTED_CLONING_FIELDS if cloning else ()) + (("voice",) if voices else ())
    return tuple(r for r in GEPARD_RULES if r.field not in served)


def split_extensions(body: object) -> tuple[object, dict]:
    """(the body vLLM-Omni's request model sees, our extension fields)."""
    if not isinstance(body, dict):
        return body, {}
    return {k: v for k, v in body.items() if k not in EXTENSION_FIELDS}, {k: body[k] for k in EXTENSION_FIELDS if k in body}


class CloningFieldError(ValueError):
    """A cloning or guidance field the server refuses; `param` names it."""

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


def reference_fields(body: dict[str, object]) -> tuple[bytes | None, bool]:
    """(the reference clip's file bytes, not yet checked as audio; whether ref_text was sent and
    ignored) from the cloning fields the rules let through."""
    ref = body.get("ref_audio")
    data = None
    if ref is not None:
        try:
            data = decode_base64_audio(ref)
        except ReferenceAudioError as e:
            raise CloningFieldError(f"ref_audio {e}", "ref_audio") from e
        if not data:
            raise CloningFieldError("ref_audio is empty", "ref_audio")
    task = body.get("task_type")
    if task is not None and task != "Base":
        raise CloningFieldError(f"task_type must be 'Base' (voice cloning) when given, got {task!r}", "task_type")
    ref_text = body.get("ref_text")
    if ref_text is not None and not isinstance(ref_text, str):
        raise CloningFieldError("ref_text must be a string (it is accepted and ignored)", "ref_text")
    return data, ref_text is not None


def with_extensions(sampling: SamplingSettings, extensions: dict[str, object]) -> SamplingSettings:
    """sampling (the request's settings before these fields: its max_frames is the request's
    max_new_tokens, which a force stop must not exceed) with the extension fields given, each
    read as its declaration reads it and checked alone, so a bad one is a 400 naming it."""
    given = {k: _json_setting(k, extensions[k]) for k in EXTENSION_FIELDS if extensions.get(k) is not None}
    for key, value in given.items():
        try:
            sampling.replace(**{key: value})
        except SettingsError as e:
            raise CloningFieldError(str(e), key) from e
    return sampling.replace(**given)


def _json_setting(key: str, value: object) -> float | int | str:
    """An extension field's JSON value as its setting takes it, by the setting's declared type: a
    number (a whole one where the setting counts frames), or the setting's word ("auto")."""
    whole, worded = whole_number(SamplingSettings, key), takes_a_word(SamplingSettings, key)
    choices = declared(SamplingSettings)[key].choices
    if choices:  # a word setting (text_normalization): one of its words; validate names a wrong one
        if not isinstance(value, str):
            raise CloningFieldError(f"{key} must be one of {list(choices)}, got {value!r}", key)
        return value
    if kind_of(SamplingSettings, key) is str:  # text (lexicon_entries): validate reads it
        if not isinstance(value, str):
            raise CloningFieldError(f"{key} must be a string, got {type(value).__name__}", key)
        return value
    if worded and isinstance(value, str) and value.strip().lower() == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (whole and not isinstance(value, int)):
        kind = "a number (an integer)" if whole else "a number"
        also = f", {AUTO!r} or null (off)" if worded else ""
        raise CloningFieldError(f"{key} must be {kind}{also}, got {value!r}", key)
    return value if whole else float(value)
