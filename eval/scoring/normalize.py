"""Text normalization applied to both reference and hypothesis before WER/CER.

Whisper's EnglishTextNormalizer (openai-whisper's `whisper.normalizers`): NFKC-style
cleanup, lowercase, punctuation to a space (not deleted), British to American spelling,
spelled-out numbers and currency to digits ("twenty-five dollars" -> "$25"), contractions
expanded, spaces collapsed. Applying it to both sides makes "9:30" and "nine thirty" or
"Mr." and "mister" compare equal, which is what make-speech-benchmark intends (facts §7).
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def _normalizer():
    # Imported lazily: `whisper` pulls in torch and numba (a few seconds).
    from whisper.normalizers import EnglishTextNormalizer

    return EnglishTextNormalizer()


def normalize(text: str) -> str:
    """Normalized words joined by single spaces; "" when nothing word-like is left."""
    out = _normalizer()(text)
    # The normalizer keeps a lone "." or "'" for inputs that are only punctuation; those
    # are not words.
    words = [w for w in out.split() if any(ch.isalnum() for ch in w)]
    return " ".join(words)
