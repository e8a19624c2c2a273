"""One window of audio, one text: openai-whisper's own forced alignment, mapped to our pieces.

`whisper.timing.find_alignment`'s method: the decoder runs once, teacher-forced on the given
tokens (no search, no sampling, no sampled retry on a failed decode: a fixed cost, so noise cannot
make it retry for minutes as a transcription can, facts §7), its cross-attention is read on a set of
heads and the monotonic path through it found by DTW; each of its words gets the frames (20 ms) the
path spends on it and the mean probability of its tokens given the audio and the words before.

What is ours:
- `readings`: the library's steps, read on two head sets (`head_sets`) from the one pass.
- The text goes in piece by piece (words.py's pieces without their edge punctuation, each after a
  space), so every Whisper word belongs to exactly one piece and a piece's span is its Whisper
  words' span (a punctuation-only Whisper word left inside, as in "9:30", is left out of it).
- Each window's audio is padded with PAD_S of silence on both sides (why: at PAD_S).
- `TrimmedEncoder`: the encoder runs on the audio's own frames instead of a 30 s window (the first
  n positional embeddings; whisper.cpp's audio_ctx). openai-whisper's encoder asserts the full
  window, so its forward is written out here with that one change; the rest is the library's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from .speech import ASR_RATE

if TYPE_CHECKING:
    from whisper.model import AudioEncoder, Whisper
    from whisper.tokenizer import Tokenizer

FRAME_S = 0.02  # one DTW step: two mel frames of 10 ms
# Silence put before and after a window's audio. The DTW's last row is the query that predicts
# the end of text, and it takes the frames after the last word: with none there (a TTS
# utterance ends at its last sound) it takes the last word's own, and "boats" ended 0.26 s
# early (median 81 ms over 12 sentences; 7 ms with this pad). The first row starts at frame 0
# whatever the audio, so a lead gives it silence to start in. Measured: benchmarks/alignment_cost.py.
PAD_S = 0.3
WINDOW_S = 30.0 - 2 * PAD_S  # the audio a window takes: Whisper's 30 s with the pads
MEDFILT_WIDTH = 7  # find_alignment's default, over the DTW matrix's frames; 1 and 3 measured no better


@dataclass(frozen=True)
class RawPiece:
    """A written piece as the DTW placed it: seconds from the window's start; start == end when
    the path gave it no frame of its own."""

    start: float
    end: float
    probability: float


def load_whisper(weights: str, cache_dir: str | None, trim_context: bool) -> tuple[Whisper, Tokenizer]:
    """(model, tokenizer) for English forced alignment, on the CPU, with the size's official
    alignment heads (a converted checkpoint loaded by path has none: the library would fall back
    to every head of the decoder's second half)."""
    import numba
    import whisper

    from .weights import DEFAULT_CACHE, openai_checkpoint

    # Whisper's DTW is numba code compiled with parallel=True, and numba's default threading layer
    # here is OpenMP: once it starts, the TTS engine in the same process computes other floats
    # (measured: the tiny model's p_stop moved in the 8th digit, so a seed replayed after the first
    # alignment could draw another frame). Its own workqueue layer leaves the process's OpenMP
    # alone; the DTW has no parallel loop to lose. Only a layer not yet started can be chosen.
    if numba.config.THREADING_LAYER == "default":  # type: ignore[attr-defined]  # numba.config sets it at import
        numba.config.THREADING_LAYER = "workqueue"  # type: ignore[attr-defined]
    path = openai_checkpoint(weights, Path(cache_dir) if cache_dir else DEFAULT_CACHE)
    model = whisper.load_model(str(path), device="cpu")
    name = Path(weights).name
    if name in whisper._ALIGNMENT_HEADS:
        model.set_alignment_heads(whisper._ALIGNMENT_HEADS[name])
    if trim_context:
        model.encoder = TrimmedEncoder(model.encoder)
    tokenizer = whisper.tokenizer.get_tokenizer(model.is_multilingual, num_languages=model.num_languages,
                                                language="en", task="transcribe")
    return model, tokenizer


class TrimmedEncoder(torch.nn.Module):
    """openai-whisper's AudioEncoder.forward on any even number of mel frames up to the window."""

    def __init__(self, encoder: AudioEncoder):
        super().__init__()
        self.inner = encoder

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        e = self.inner
        x = F.gelu(e.conv1(mel))
        x = F.gelu(e.conv2(x)).permute(0, 2, 1)
        x = (x + e.positional_embedding[: x.shape[1]]).to(x.dtype)
        for block in e.blocks:
            x = block(x)
        return e.ln_post(x)


def max_text_tokens(model, tokenizer) -> int:
    """Text tokens one window takes: the decoder's context less the start sequence, the
    no-timestamps token and the end token."""
    return model.dims.n_text_ctx - len(tokenizer.sot_sequence) - 2


def piece_tokens(tokenizer, written: list[str]) -> list[list[int]]:
    return [tokenizer.encode(" " + w) for w in written]


def head_sets(model) -> list[list[tuple[int, int]]]:
    """The (layer, head) pairs of each reading of the cross-attention: the size's official alignment
    heads, then every head of the decoder's second half (openai-whisper's choice for a model it
    knows no heads of; one reading when the two are the same). Each reading errs on its own
    words (measured at joins: a word 0.2-0.6 s off in one reading, near in another), so the
    aligner takes the median of all of them (aligner.median_spans)."""
    n_layers, n_heads = model.dims.n_text_layer, model.dims.n_text_head
    official = sorted((int(a), int(b)) for a, b in model.alignment_heads.indices().T)
    half = [(a, b) for a in range(n_layers // 2, n_layers) for b in range(n_heads)]
    return [official] if official == half else [official, half]


def readings(model, tokenizer, text_tokens: list[int], mel: torch.Tensor, num_frames: int) -> list[list]:
    """`whisper.timing.find_alignment` (its default medfilt_width and qk_scale), read with each of head_sets
    from one pass of the model: its steps, with the matrix and the DTW once per set. Calling the
    library once per set would run the encoder (most of the cost) again for each."""
    from whisper.model import disable_sdpa
    from whisper.timing import TOKENS_PER_SECOND, WordTiming, dtw, median_filter

    sot = len(tokenizer.sot_sequence)
    tokens = torch.tensor([*tokenizer.sot_sequence, tokenizer.no_timestamps, *text_tokens, tokenizer.eot])
    qks: list = [None] * model.dims.n_text_layer
    hooks = [block.cross_attn.register_forward_hook(lambda _, ins, outs, i=i: qks.__setitem__(i, outs[-1][0]))
             for i, block in enumerate(model.decoder.blocks)]
    try:
        with torch.no_grad(), disable_sdpa():
            logits = model(mel.unsqueeze(0), tokens.unsqueeze(0))[0]
    finally:
        for hook in hooks:
            hook.remove()
    probs = logits[sot:, : tokenizer.eot].softmax(dim=-1)[np.arange(len(text_tokens)), text_tokens].tolist()
    words, word_tokens = tokenizer.split_to_word_tokens(text_tokens + [tokenizer.eot])
    bounds = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    out = []
    for heads in head_sets(model):
        weights = torch.stack([qks[a][b] for a, b in heads])[:, :, : num_frames // 2].softmax(dim=-1)
        std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
        matrix = median_filter((weights - mean) / std, MEDFILT_WIDTH).mean(dim=0)[sot:-1]
        text_indices, time_indices = dtw(-matrix)
        jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
        times = time_indices[jumps] / TOKENS_PER_SECOND
        out.append([WordTiming(word, toks, times[i], times[j], float(np.mean(probs[i:j])))
                    for word, toks, i, j in zip(words, word_tokens, bounds[:-1], bounds[1:])])
    return out


def align_window(model, tokenizer, audio16k: np.ndarray, tokens: list[list[int]]) -> list[list[RawPiece]]:
    """Each piece's span (seconds into this window) and probability, once per reading (head_sets,
    the official heads' first). audio16k: at most WINDOW_S."""
    import whisper

    trimmed = isinstance(model.encoder, TrimmedEncoder)
    pad = np.zeros(int(PAD_S * ASR_RATE), np.float32)
    x = torch.from_numpy(np.concatenate([pad, np.asarray(audio16k, np.float32), pad]))
    if trimmed:
        mel = whisper.log_mel_spectrogram(x, model.dims.n_mels, padding=0)
        mel = F.pad(mel, (0, mel.shape[-1] % 2))  # the encoder's stride-2 conv wants an even count
    else:
        mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(x), model.dims.n_mels)
    flat = [t for piece in tokens for t in piece]
    length = len(audio16k) / ASR_RATE
    return [_pieces(timings, tokens, length) for timings in readings(model, tokenizer, flat, mel, len(x) // 160)]


def _pieces(timings: list, tokens: list[list[int]], length: float) -> list[RawPiece]:
    """Whisper's word timings (seconds into the padded window) gathered into our pieces."""

    def unpadded(t: float) -> float:
        return float(min(max(t - PAD_S, 0.0), length))

    out, k = [], 0
    for piece in tokens:
        mine, used = [], 0
        while used < len(piece) and k < len(timings):
            mine.append(timings[k])
            used += len(timings[k].tokens)
            k += 1
        worded = [t for t in mine if any(ch.isalnum() for ch in t.word)] or mine
        n = sum(len(t.tokens) for t in worded) or 1
        p = sum(t.probability * len(t.tokens) for t in worded) / n
        out.append(RawPiece(unpadded(worded[0].start), unpadded(worded[-1].end), float(p)) if worded
                   else RawPiece(0.0, 0.0, 0.0))
    return out
