"""Batched prefill + incremental decode with the backbone's cache (facts §3).

Stop semantics follow vLLM-Omni: the frame sampled from the SOS position always commits; from
the next step on, the stop head is judged on the same hidden row that sampled the frame, and a
step whose p_stop exceeds the threshold commits no frame. So an utterance has at least one
frame. The frame budget ends a runaway and says so.

Classifier-free guidance (facts §9) runs the text-free branch as extra rows of the same batch:
each has its own prompt and positions, is fed the frames its conditional row commits, and is
dropped once its request's `cfg_frames` are made. The stop head is read on the conditional row.

Rows in a batch are left-padded: the full-attention layers mask the padding, and the
Gated-DeltaNet layers zero it (transformers' padding mask), so a padded row starts from the
same zero state as a solo one. A row that finishes is dropped from the cache at once.

On an all-full-attention backbone (Gepard-1.0) transformers 5.14 cannot take a 2-D padding
mask: the model always builds the linear-attention mask too, which asks the cache
`has_previous_state()`, and a cache without linear-attention layers raises. So for that layout
the loop builds the full-attention mask itself with transformers' own `create_causal_mask` and
passes the model its mask mapping (`{"full_attention": mask}`), which the model uses as given.
The hybrid layout keeps the plain 2-D mask. tests/test_padded_batch.py fails if either path
stops matching solo runs after a transformers upgrade.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache
from transformers.masking_utils import create_causal_mask

from gepard_demo.settings import SamplingSettings

from .sampling import RowSampler, sample_codes
from .talker import GepardTalker


@dataclass(frozen=True)
class FrameStep:
    """One decode step of one request."""

    index: int  # step number; equals the number of frames committed before it
    codes: torch.Tensor | None  # (32,) committed codes, or None on the stop step
    p_stop: float
    elapsed_s: float  # since the request (batch) started
    done: str | None = None  # None, "stop" (stop head fired) or "budget" (max_frames hit)


@dataclass
class GenerationResult:
    text: str
    frames: torch.Tensor  # (T, 32) long
    p_stop: list[float]  # one per step: T, plus the stop step when the stop head fired
    stop_fired: bool
    stop_frame: int | None  # frames committed when the stop head fired
    runaway: bool  # the budget ended it
    seed: int
    prompt_tokens: int
    gen_time_s: float = 0.0
    first_frame_s: float = 0.0
    settings: SamplingSettings = field(default_factory=SamplingSettings)

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])


def full_attention_only(backbone_config) -> bool:
    return all(t == "full_attention" for t in backbone_config.layer_types)


def padding_mask(talker: GepardTalker, mask, embeds, positions, cache):
    """What to pass as `attention_mask` for a padded batch (see the module docstring)."""
    backbone = talker.config.backbone
    if not full_attention_only(backbone):
        return mask
    # The mask's fill value follows the dtype the layers compute in, not the fp32 embeddings.
    causal = create_causal_mask(
        config=backbone, inputs_embeds=embeds.to(talker.backbone_dtype), attention_mask=mask, past_key_values=cache,
        position_ids=positions,
    )
    return {"full_attention": causal}


def guide_logits(cond: torch.Tensor, uncond: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Classifier-free guidance per head in fp32: u + w * (c - u) (facts §9).

    The -inf padding slots stay -inf (the formula would make them NaN).
    """
    cond, uncond = cond.float(), uncond.float()
    return torch.where(torch.isfinite(cond), uncond + scale.view(-1, 1, 1) * (cond - uncond), cond)


def decode_batch(
    talker: GepardTalker,
    prompts: list[list[int]],
    samplers: list[RowSampler],
    unconditional: list[list[int] | None] | None = None,
    speakers: list[torch.Tensor | None] | None = None,
) -> Iterator[tuple[int, FrameStep]]:
    """Yield (request, FrameStep) for every request at every step until each is done.

    unconditional: per request, the guidance branch's prompt (None = unguided); it runs as one
        more row of the same batch, with its own positions, fed the frames the conditional row
        commits, until the request's `cfg_frames` are made.
    speakers: per request, a (K, hidden) speaker prefix for the slots (None = `null_prefix`).
    Closing the iterator stops the work at the next step (the demo's Stop button).
    """
    device = talker.device
    start = time.perf_counter()
    n = len(prompts)
    unconditional = unconditional or [None] * n
    # A batch row is (request, is_unconditional): the n conditional rows, then the guidance rows.
    rows = [(i, False) for i in range(n)] + [(i, True) for i in range(n) if unconditional[i] is not None]
    row_prompts = [unconditional[i] if unc else prompts[i] for i, unc in rows]
    width = max(len(p) for p in row_prompts)
    ids = torch.zeros(len(rows), width, dtype=torch.long, device=device)
    mask = torch.zeros(len(rows), width, dtype=torch.long, device=device)
    for r, p in enumerate(row_prompts):
        ids[r, width - len(p) :] = torch.tensor(p, device=device)
        mask[r, width - len(p) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=talker.config.backbone)
    speaker_rows = None
    if speakers is not None and any(s is not None for s in speakers):
        speaker_rows = torch.stack([talker.null_prefix if speakers[i] is None else speakers[i].to(device) for i, _ in rows])
    cfg_frames = [s.settings.cfg_frames for s in samplers]
    scales = [s.settings.cfg_scale for s in samplers]

    # Inference mode is entered for each step's work, never across a yield: a consumer may
    # resume this generator from another thread (the pipeline's talker thread, a GPU call's
    # worker), and inference mode is a per-thread switch.
    with torch.inference_mode():
        embeds = talker.embed_prompt(ids, speaker_rows)
        # A padding-free batch needs no mask at all; passing none keeps the fast path.
        padded = bool((mask == 0).any())
        hidden = talker.backbone(
            embeds,
            attention_mask=padding_mask(talker, mask, embeds, positions, cache) if padded else None,
            position_ids=positions,
            past_key_values=cache,
        )
    active = rows  # batch row -> (request, is_unconditional)
    committed = [0] * n
    last_pos = positions[:, -1]

    while active:
        with torch.inference_mode():
            logits, p_stop = talker.head_logits(hidden)
            cond_rows = [r for r, (_, unc) in enumerate(active) if not unc]
            reqs = [active[r][0] for r in cond_rows]
            if len(cond_rows) < len(active):
                slot = {req: k for k, req in enumerate(reqs)}
                unc_rows = [r for r, (_, unc) in enumerate(active) if unc]
                guided = torch.tensor([slot[active[r][0]] for r in unc_rows], device=device)
                scale = torch.tensor([scales[active[r][0]] for r in unc_rows], device=device)
                cond_logits = logits[cond_rows]
                cond_logits[guided] = guide_logits(cond_logits[guided], logits[unc_rows], scale)
                logits, p_stop = cond_logits, p_stop[cond_rows]
            codes = sample_codes(logits, [samplers[r] for r in reqs])
            p_list = p_stop.tolist()  # the conditional rows': the stop is judged there
            codes_cpu = codes.cpu().unbind(0)
        now = time.perf_counter() - start
        going: dict[int, int] = {}  # request -> its row in `codes`
        events: list[tuple[int, FrameStep]] = []
        for k, req in enumerate(reqs):
            settings = samplers[req].settings
            if committed[req] > 0 and p_list[k] > settings.stop_threshold:
                events.append((req, FrameStep(committed[req], None, p_list[k], now, "stop")))
                continue
            committed[req] += 1
            done = "budget" if committed[req] >= settings.max_frames else None
            events.append((req, FrameStep(committed[req] - 1, codes_cpu[k], p_list[k], now, done)))
            if done is None:
                going[req] = k
        yield from events
        # A guidance row lives while its request does and still has frames to guide.
        keep = [
            r
            for r, (req, unc) in enumerate(active)
            if req in going and not (unc and cfg_frames[req] is not None and committed[req] >= cfg_frames[req])
        ]
        if not keep:
            break
        with torch.inference_mode():
            if len(keep) != len(reqs) or len(active) != len(reqs):  # else the rows map 1:1
                codes = codes[torch.tensor([going[active[r][0]] for r in keep], device=device)]
            if len(keep) < len(active):
                index = torch.tensor(keep, device=device)
                # reorder_cache is an index_select on every layer kind (linear-attention states
                # included), so a subset of indices drops the finished rows.
                cache.reorder_cache(index)
                mask = mask[index]
                last_pos = last_pos[index]
                active = [active[r] for r in keep]
            mask = torch.cat([mask, torch.ones(len(active), 1, dtype=mask.dtype, device=device)], dim=1)
            last_pos = last_pos + 1
            step_embeds = talker.embed_frame(codes).unsqueeze(1)
            step_pos = last_pos.unsqueeze(1)
            hidden = talker.backbone(
                step_embeds,
                attention_mask=padding_mask(talker, mask, step_embeds, step_pos, cache) if padded else None,
                position_ids=step_pos,
                past_key_values=cache,
            )
