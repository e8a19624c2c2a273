"""What a run refuses before it synthesizes anything, the same way for every engine.

- `input_error`: an utterance no engine can speak (the app's own text rule: nothing speakable, or
  above gepard_demo's 2000-character limit), or one the run's settings cannot apply to: with
  the force stop's "auto" a text with no word has no length to scale the cap from (the setting
  names the field). Such an utterance goes to errors.jsonl with the reason and the run goes on
  without it: one wordless line of a set should not cost the other sentences their run.
- `check_text_repetition`: `--text-repetition off` (the authors' no-repetition baseline,
  MODEL_GUIDE §5.3) is refused where it would change nothing: the checkpoint's own repetition is
  disabled, or no text of the set is short enough to be repeated (prompt.py's `repetitions`: fewer
  tokens than both apply_below and target_text_tokens). A run that changes nothing would be
  scored and compared as if it were the baseline.
"""

from __future__ import annotations

from pathlib import Path

from eval.runs.sets import Utterance
from gepard_demo.settings import SamplingSettings, SettingsError

# Engines that run Gepard's sampling (their settings reach the decode step).
GEPARD_ENGINES = ("local", "local-stream", "server")


def input_error(u: Utterance, sampling: SamplingSettings | None = None, engine: str = "local") -> str | None:
    """Why this utterance cannot be synthesized as asked, or None (module docstring)."""
    from gepard_demo.streaming.text_input import TextError, clean_text

    try:
        clean_text(u.text)
    except TextError as e:
        return str(e)
    if sampling is not None and engine in GEPARD_ENGINES:
        from gepard_demo.model.guards.guardrails import force_stop_for

        try:
            force_stop_for(sampling, u.text)
        except SettingsError as e:
            return str(e)
    return None


def text_repetition_error(engine, items: list[Utterance]) -> str | None:
    """Why `--text-repetition off` would not change any prompt of these items, or None (module docstring)."""
    from gepard_demo.model.prompt import PromptError, encode_text, repetitions

    e = engine.gepard()
    if e is None:
        return "--text-repetition off needs Gepard's tokenizer and prompt here (--engine local or local-stream)"
    rep = e.config.text_repetition
    if not rep.enabled:
        return ("--text-repetition off would change nothing: this checkpoint's text repetition is disabled "
                "(every prompt already has one copy of its text)")
    counts = []
    for u in items:
        try:
            counts.append(len(encode_text(u.text, e.tokenizer)))
        except PromptError:
            continue
    if not any(repetitions(n, rep) > 1 for n in counts):
        return (f"--text-repetition off would change nothing: no text of this set is short enough to be repeated "
                f"(a text is repeated below {min(rep.apply_below, rep.target_text_tokens)} tokens; the shortest "
                f"here has {min(counts, default=0)}); try --set short")
    return None


def voices_error(voices: tuple[str, ...], folder: str | None, engine: str, ref_audio: str | None) -> str | None:
    """Why a run cannot speak in these saved voices (None: it can). A local engine reads each from
    `folder`; a server checks its own list before the first request (SpeechClient.check_voice)."""
    if not voices:
        return None
    if ref_audio is not None:
        return "give --ref-audio FILE or --voice NAME, not both"
    if engine in ("piper", "files"):
        return f"--engine {engine} cannot take --voice (local, local-stream and server can)"
    keys = [v.strip().lower() for v in voices]
    if len(set(keys)) < len(keys) or not all(keys):
        return f"--voice names must be distinct and not empty (names are case-insensitive): {list(voices)}"
    if engine == "server":
        return None
    if not folder or not Path(folder).is_dir():
        return f"--voice needs --voices-dir, the folder its voices are saved in ({folder or 'none given'} is not one)"
    from gepard_demo.voice.library import VoiceLibrary

    library = VoiceLibrary(folder)
    missing = [v for v in voices if library.find(v) is None]
    return f"--voice {', '.join(missing)}: no such saved voice in {folder}" if missing else None
