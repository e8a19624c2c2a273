"""The model authors' runner, written out for the tests: what our guidance branch and guardrails
must equal.

From gepard-train gepard/inference/runner.py (`GepardRunner.generate`, cfg_uncond_mode
"empty_text"; facts §9): the text-free branch is the shared speaker prefix, then [SOT, EOT, SOS];
each branch is prefilled on its own and fed the same frames; per head, in fp32,
logit = u + w (c - u) before sampling; the stop is read on the conditional branch; past
cfg_frames only the conditional branch runs. The layout comes from the checkpoint's files, the
embeddings and head logits from the talker's modules by hand: nothing here calls the prompt
builder, the fused heads, the cache or the padding our engine uses.

The guardrails (facts §15), from the same `generate` and its `_sample_head_logits`: the repetition
penalty over `generated[-window:]` (all of it for window 0; nothing for the first frame), per
head over the set of codes seen, dividing a positive logit and multiplying a negative one, then
temperature, then top-k, softmax and multinomial, one head at a time; the force stop is checked
after each decode step and before the stop head: `len(generated) >= force_stop_frames` ends it.
With top_k=1 that sampling is deterministic, so a run of ours can be checked frame by frame.
"""

from __future__ import annotations

import json

import torch
from safetensors import safe_open

TIE = 1e-4  # a greedy choice this close to its runner-up may go either way in the last bits (facts §3)


def authors_uncond_layout(model_dir) -> list[int]:
    """[slot 0 .. slot K-1, SOT, EOT, SOS] from the checkpoint's own files: K is null_prefix's first
    dimension (the prefix slots the authors' runner fills), the ids are gepard_config.json's."""
    st = json.loads((model_dir / "gepard_config.json").read_text())["special_tokens"]
    k = 0
    for path in sorted(model_dir.glob("*.safetensors")):
        with safe_open(str(path), "pt") as f:
            if "null_prefix" in f.keys():
                k = f.get_slice("null_prefix").get_shape()[0]
    return [st["tokeniser_length"] + i for i in range(k)] + [st["start_of_text"], st["end_of_text"], st["start_of_speech"]]


class Branch:
    """One branch of the authors' runner, computed the plain way: the prompt's token embeddings
    with the speaker prefix in its K slots, every fed-back frame's embedding after them, and an
    uncached forward over all of it at every step."""

    def __init__(self, talker, ids: list[int], prefix: torch.Tensor):
        self.talker = talker
        k = prefix.shape[0]
        with torch.inference_mode():
            embeds = talker.model.embed_tokens(torch.tensor([ids])).clone()
            slots = [i for i, t in enumerate(ids) if t >= talker.config.speaker_token_base]
            assert slots == list(range(k)), "the speaker slots open the prompt"
            embeds[0, :k] = prefix
        self.embeds = embeds

    def heads(self) -> tuple[list[torch.Tensor], float]:
        """Each codebook head's fp32 logits at the last position, and p_stop there."""
        with torch.inference_mode():
            h = self.talker.model(inputs_embeds=self.embeds, use_cache=False).last_hidden_state[:, -1]
            logits = [head(h).float()[0] for head in self.talker.codebook_heads]
            return logits, float(torch.sigmoid(self.talker.stop_head(h).float()))

    def feed(self, codes: torch.Tensor) -> None:
        with torch.inference_mode():
            self.embeds = torch.cat([self.embeds, self.talker.embed_frame(codes.view(1, -1)).unsqueeze(1)], dim=1)


def assert_authors_guided_frames(engine, model_dir, text, settings, frames, prefix=None):
    """`frames` (greedy, guided) are, frame by frame, the argmax of u + w (c - u) of the authors'
    two branches fed those same frames; a differing head is allowed only at a rounding tie."""
    talker = engine.talker
    prefix = talker.null_prefix.detach() if prefix is None else prefix
    cond = Branch(talker, engine.prompt_ids(text), prefix)  # the conditional layout: tests/model/test_prompt.py pins it
    uncond = Branch(talker, authors_uncond_layout(model_dir), prefix)
    w, n = settings.cfg_scale, settings.cfg_frames
    differing = 0
    for k, got in enumerate(frames):
        c, p_stop = cond.heads()
        guided = n is None or k < n
        if guided:
            u, _ = uncond.heads()
            logits = [ui + w * (ci - ui) for ci, ui in zip(c, u)]
        else:
            logits = c
        if k > 0:
            assert p_stop <= settings.stop_threshold, k  # the conditional branch's stop would have ended it
        for head, (row, code) in enumerate(zip(logits, got.tolist())):
            want = int(row.argmax())
            if code != want:
                top2 = row.topk(2).values
                assert float(top2[0] - top2[1]) < TIE, (k, head, code, want)
                differing += 1
        cond.feed(got)
        if guided:
            uncond.feed(got)
    assert differing <= 2, differing  # ties are rare: more means another computation


def runner_sample_head(logits: torch.Tensor, head: int, temperature: float, top_k: int, penalty: float,
                       recent: list[torch.Tensor] | None) -> int:
    """gepard-train's `TTSRunner._sample_head_logits`, line for line, on one head's (levels,) logits."""
    logits = logits.clone().view(1, -1).float()
    if penalty != 1.0 and recent:
        seen = {t[head].item() for t in recent}
        for tok in seen:
            if logits[0, tok] > 0:
                logits[0, tok] /= penalty
            else:
                logits[0, tok] *= penalty
    if temperature != 1.0:
        logits = logits / temperature
    if top_k > 0:
        k = min(top_k, logits.shape[-1])
        threshold = torch.topk(logits, k)[0][:, -1:]
        logits = logits.masked_fill(logits < threshold, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return int(torch.multinomial(probs, num_samples=1).squeeze())


def runner_window(frames: list[torch.Tensor], window: int, penalty: float) -> list[torch.Tensor] | None:
    """What the runner hands `_sample_frame` as recent_frames before sampling frame len(frames)."""
    if penalty == 1.0 or not frames:
        return None  # the first frame is sampled with recent_frames=None
    return list(frames) if window == 0 else list(frames[-window:])


def assert_authors_frames(engine, model_dir, text, settings, result, prefix=None, force_stop=None):
    """`result` (a GenerationResult made with top_k=1) is, frame by frame, the authors' runner's:
    each frame its `_sample_head_logits` choice (the repetition window from the frames before it,
    guidance as in assert_authors_guided_frames), and it ends where the runner's loop would: the
    force stop first, then the stop head on the conditional branch, then the frame budget.
    force_stop: the frame count the run was asked to stop at (auto resolved by the test itself)."""
    assert settings.top_k == 1 and not settings.greedy, "the runner is deterministic only at top_k=1"
    talker = engine.talker
    prefix = talker.null_prefix.detach() if prefix is None else prefix
    cond = Branch(talker, engine.prompt_ids(text), prefix)
    uncond = Branch(talker, authors_uncond_layout(model_dir), prefix) if settings.guided else None
    w, n = settings.cfg_scale, settings.cfg_frames
    frames = list(result.frames)
    differing = 0
    for k, got in enumerate(frames + [None]):
        c, p_stop = cond.heads()
        if k > 0:
            # The runner's order after a decode step: the force stop, then the stop head.
            if force_stop is not None and k >= force_stop:
                assert got is None and result.ended_by == "force_stop" and k == len(frames), (k, result.ended_by)
                break
            if p_stop > settings.stop_threshold:
                assert got is None and result.ended_by == "stop", (k, p_stop, result.ended_by)
                break
        if got is None:  # the runner's loop ran out: range(1, max_frames)
            assert k == settings.max_frames and result.ended_by == "budget", (k, result.ended_by)
            break
        guided = uncond is not None and (n is None or k < n)
        logits = c
        if guided:
            u, _ = uncond.heads()
            logits = [ui + w * (ci - ui) for ci, ui in zip(c, u)]
        recent = runner_window(frames[:k], settings.repetition_window, settings.repetition_penalty)
        for head, (row, code) in enumerate(zip(logits, got.tolist())):
            want = runner_sample_head(row, head, settings.temperature, 1, settings.repetition_penalty, recent)
            if code != want:
                top2 = _penalized(row, head, settings.repetition_penalty, recent).topk(2).values
                assert float(top2[0] - top2[1]) < TIE, (k, head, code, want)
                differing += 1
        cond.feed(got)
        if guided:
            uncond.feed(got)
    assert differing <= 2, differing


def _penalized(row: torch.Tensor, head: int, penalty: float, recent) -> torch.Tensor:
    out = row.clone().float()
    if penalty != 1.0 and recent:
        for tok in {t[head].item() for t in recent}:
            out[tok] = out[tok] / penalty if out[tok] > 0 else out[tok] * penalty
    return out
