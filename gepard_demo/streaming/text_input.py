"""What text a request may carry, and how long text is cut into segments.

Shared by every way in (the page, the speech server, the CLI, eval): `clean_text` applies the
prompt's own normalisation and refuses empty or too-long text with `TextError` before any work
starts; `split_text` cuts text above SEGMENT_CHARS into sentence-aligned segments, which a
SynthesisSession generates one after the other in one decoder stream. Its sentences are the
speech WebSocket's (text_splitter.sentences, vLLM-Omni's rule): a segment never ends at an
abbreviation or an initial ("Dr.", "e.g.", "U.S.", "J."), which would make two utterances of one.

Text above MAX_TEXT_CHARS (2000) is refused where a host must share its engine or a visitor's GPU
quota (a public Space, our server): at ~15 characters per second that is already over two minutes
of audio. Off a public Space the page and `synth` take a chapter, up to CHAPTER_CHARS (50,000
characters, about an hour of speech), typed or read from a .txt file (`read_text_file`); its
segments are generated ahead of playback (segments.py) and its played audio is not held in memory.
A text with nothing but whitespace and punctuation is refused (there is nothing to say), and a
piece of a long text that is only punctuation joins its neighbour instead of becoming a segment.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from gepard_demo.model.prompt import PromptError, normalize_text
from gepard_demo.streaming.text_splitter import sentences

MAX_TEXT_CHARS = 2000
CHAPTER_CHARS = 50_000
SEGMENT_CHARS = 400


class TextError(ValueError):
    """The text cannot be synthesized (empty, only unprintable characters, or too long)."""


def clean_text(text: str, max_chars: int = MAX_TEXT_CHARS) -> str:
    """The prompt's own normalisation (NFC, unspeakable code points dropped, whitespace
    collapsed), checked up front so the page can say what is wrong before any work starts.

    Raises TextError when nothing speakable is left (empty text must be rejected loudly,
    facts §2) or when the text is longer than max_chars.
    """
    try:
        cleaned = normalize_text(text)
    except PromptError as exc:
        raise TextError(str(exc)) from exc
    if not cleaned:
        raise TextError("Please enter some text to speak (the text is empty or has no printable characters).")
    if not _speakable(cleaned):
        raise TextError("The text has nothing to say: it is only punctuation and spaces.")
    if len(cleaned) > max_chars:
        raise TextError(f"The text is {len(cleaned)} characters long; the limit is {max_chars}. Please shorten it.")
    return cleaned


def _speakable(text: str) -> bool:
    """Anything but whitespace and punctuation (letters, digits, symbols and emoji all count)."""
    return any(not ch.isspace() and not unicodedata.category(ch).startswith("P") for ch in text)


def read_text_file(path: str | Path, max_chars: int = CHAPTER_CHARS) -> str:
    """A .txt file's text (UTF-8, a BOM allowed), checked like typed text; TextError naming the file
    when it is not UTF-8 text (a PDF, a Word file, Latin-1), empty, or over the limit."""
    path = Path(path)
    data = path.read_bytes()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise TextError(f"{path.name} is UTF-16 text, not UTF-8; save it as UTF-8 .txt")
    if b"\x00" in data[:4096]:
        raise TextError(f"{path.name} is not a text file (it holds binary data); save it as UTF-8 .txt")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TextError(f"{path.name} is not UTF-8 text (byte {exc.start} cannot be read as UTF-8); "
                        "save it as UTF-8 .txt") from None
    return clean_text(text, max_chars)


def split_text(text: str, segment_chars: int = SEGMENT_CHARS) -> list[str]:
    """Split text into segments of at most segment_chars, on sentence ends where possible.

    A sentence longer than segment_chars is split at the last comma or space before the
    limit, and as a last resort hard at the limit, so no segment exceeds it.
    """
    if len(text) <= segment_chars:
        return [text]
    pieces: list[str] = []
    for sentence in sentences(text):
        while len(sentence) > segment_chars:
            window = sentence[: segment_chars + 1]
            cut = max(window.rfind(", "), window.rfind(" "))
            cut = cut + 1 if cut > 0 else segment_chars
            pieces.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if sentence and not _speakable(sentence) and pieces:
            pieces[-1] = pieces[-1] + " " + sentence  # only punctuation: it belongs to the sentence before
        elif sentence:
            pieces.append(sentence)
    # Pack consecutive sentences while they fit: fewer, longer segments keep prosody.
    segments: list[str] = []
    for piece in pieces:
        if segments and len(segments[-1]) + 1 + len(piece) <= segment_chars:
            segments[-1] = segments[-1] + " " + piece
        else:
            segments.append(piece)
    return segments
