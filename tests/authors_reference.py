"""The model authors' runner, written out for the tests: what our guidance branch must equal.

From gepard-train gepard/inference/runner.py (`GepardRunner.generate`, cfg_uncond_mode
"empty_text"; facts §9): the text-free branch is the shared speaker prefix, then [SOT, EOT, SOS];
each branch is prefilled on its own and fed the same frames; per head, in fp32,
logit = u + w (c - u) before sampling; the stop is read on the conditional branch; past
cfg_frames only the conditional branch runs. The layout comes from the checkpoint's files, the
embeddings and head logits from the talker's modules by hand: nothing here calls the prompt
builder, the fused heads, the cache or the padding our engine uses.
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
    cond = Branch(talker, engine.prompt_ids(text), prefix)  # the conditional layout: test_prompt.py pins it
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
