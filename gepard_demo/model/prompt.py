"""Gepard prompt layout (facts §2).

`[speaker slots] + [SOT, *text, EOT] * (R-1) + [SOT, *text, EOT, SOS]`

Only the last copy carries SOS, the learned "audio starts now" gate; the earlier copies are
context. Short texts repeat because a couple of text tokens carry too little mass against the
speaker prefix: without it 60-96% of <= 6-token prompts fail.
"""

from __future__ import annotations

import math
import unicodedata

from .config import GepardConfig, TextRepetition


class PromptError(ValueError):
    """The text cannot be turned into a prompt (empty after normalisation)."""


# Control, format (zero-width joiners), surrogate, private-use and unassigned code points.
_UNSPEAKABLE = ("Cc", "Cf", "Cs", "Co", "Cn")


def normalize_text(text: str) -> str:
    """NFC, unspeakable code points dropped, whitespace collapsed to single spaces.

    Browsers and pastes bring lone surrogates, zero-width characters and stray controls; they
    carry no speech, and would reach the tokenizer as byte sequences it never saw in training.
    """
    if not isinstance(text, str):
        raise PromptError(f"text must be a string, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text)
    kept = (" " if ch.isspace() else ch for ch in text if ch.isspace() or unicodedata.category(ch) not in _UNSPEAKABLE)
    return " ".join("".join(kept).split())


def repetitions(n_tokens: int, rep: TextRepetition) -> int:
    if not rep.enabled or n_tokens <= 0 or n_tokens >= rep.apply_below or n_tokens >= rep.target_text_tokens:
        return 1
    return max(1, min(math.ceil(rep.target_text_tokens / n_tokens), rep.max_repeats))


def build_prompt_ids(text_ids: list[int], config: GepardConfig, repeat: bool = True) -> list[int]:
    """repeat=False: one copy of the text whatever its length (the authors' no-repetition
    baseline, MODEL_GUIDE §5.3), where the checkpoint's rule would repeat it."""
    if not text_ids:
        # The layout would still be valid, and the model would voice arbitrary audio.
        raise PromptError("text is empty: there is nothing to say")
    st = config.special_tokens
    r = repetitions(len(text_ids), config.text_repetition) if repeat else 1
    block = [st.start_of_text, *text_ids, st.end_of_text]
    slots = [config.speaker_token_base + i for i in range(config.num_speaker_prefix)]
    return slots + block * (r - 1) + block + [st.start_of_speech]


def encode_text(text: str, tokenizer) -> list[int]:
    """Normalised text -> token ids, without special tokens (the layout adds its own)."""
    clean = normalize_text(text)
    if not clean:
        raise PromptError("text is empty or whitespace only: type something to say")
    return list(tokenizer(clean, add_special_tokens=False)["input_ids"])


def build_unconditional_prompt_ids(config: GepardConfig) -> list[int]:
    """The classifier-free guidance branch without the text (the authors' "empty_text" mode):
    the same speaker slots, then `[SOT, EOT, SOS]` (facts §9)."""
    st = config.special_tokens
    slots = [config.speaker_token_base + i for i in range(config.num_speaker_prefix)]
    return slots + [st.start_of_text, st.end_of_text, st.start_of_speech]
