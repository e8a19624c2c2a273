"""What a decode step yields and the masks a padded batch needs (facts §3); the loop itself is
batch.py's `DecodeBatch` (requests join and leave between steps) and `decode_batch`.

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
Requests may join a running batch between steps (batch.py).

On an all-full-attention backbone (Gepard-1.0) transformers 5.14 cannot take a 2-D padding
mask: the model always builds the linear-attention mask too, which asks the cache
`has_previous_state()`, and a cache without linear-attention layers raises. So for that layout
the loop builds the full-attention mask itself with transformers' own `create_causal_mask` and
passes the model its mask mapping (`{"full_attention": mask}`), which the model uses as given.
The hybrid layout keeps the plain 2-D mask. tests/model/test_padded_batch.py fails if either path
stops matching solo runs after a transformers upgrade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from transformers.masking_utils import create_causal_mask

from gepard_demo.model.guards.ending import STOP, Ended
from gepard_demo.settings import SamplingSettings

from .config import full_attention_layers
from .talker import GepardTalker

if TYPE_CHECKING:
    from transformers import Qwen3_5TextConfig


@dataclass(frozen=True)
class FrameStep:
    """One decode step of one request."""

    index: int  # step number; equals the number of frames committed before it
    codes: torch.Tensor | None  # (32,) committed codes, or None on the stop step
    p_stop: float
    elapsed_s: float  # since the request (batch) started
    done: str | None = None  # None, "stop" (stop head fired), "budget" (max_frames hit) or "force_stop"
    batch_step: int = 0  # the running batch's step count: every request in it shares this clock
    entropy: float = float("nan")  # the probe's belief entropy at this step (probe.py), nats
    nll: float | None = None  # the committed frame's NLL under that belief; None on the stop step


@dataclass
class GenerationResult(Ended):
    text: str
    frames: torch.Tensor  # (T, 32) long
    p_stop: list[float]  # one per step: T, plus the stop step when the stop head fired
    stop_frame: int | None  # frames committed when the stop head fired
    seed: int
    prompt_tokens: int
    gen_time_s: float = 0.0
    first_frame_s: float = 0.0
    settings: SamplingSettings = field(default_factory=SamplingSettings)
    ended_by: str = STOP  # "stop", "budget" or "force_stop" (ending.py): stop_fired, runaway and force_stopped follow
    entropy: list[float] = field(default_factory=list)  # the probe's, one per step (as p_stop)
    nll: list[float] = field(default_factory=list)  # one per committed frame
    force_stop: int | None = None  # the frame count it would be force-stopped at ("auto" resolved)

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])


def full_attention_only(backbone_config: Qwen3_5TextConfig) -> bool:
    return full_attention_layers(backbone_config) == backbone_config.num_hidden_layers


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


class ResultBuilder:
    """One request's FrameSteps, gathered into its GenerationResult as they come."""

    def __init__(self, text: str, seed: int, prompt_tokens: int, settings: SamplingSettings,
                 force_stop: int | None = None):
        self.text, self.seed, self.prompt_tokens, self.settings = text, seed, prompt_tokens, settings
        self.force_stop = force_stop
        self.frames: list[torch.Tensor] = []
        self.p_stop: list[float] = []
        self.entropy: list[float] = []
        self.nll: list[float] = []
        self.first: float | None = None
        self.end: FrameStep | None = None

    def add(self, step: FrameStep) -> bool:
        """Take one step; True once the request is done."""
        self.p_stop.append(step.p_stop)
        self.entropy.append(step.entropy)
        if step.codes is not None:
            assert step.nll is not None  # a committed frame's NLL is always read (None only on the stop step)
            self.frames.append(step.codes)
            self.nll.append(step.nll)
            if self.first is None:
                self.first = step.elapsed_s
        if step.done:
            self.end = step
        return self.end is not None

    def result(self) -> GenerationResult:
        end = self.end
        if end is None or end.done is None:  # add() keeps only a step that ended it
            raise RuntimeError(f"the request for {self.text!r} has not ended")
        return GenerationResult(
            text=self.text, frames=torch.stack(self.frames).cpu(), p_stop=self.p_stop,
            stop_frame=end.index if end.done == STOP else None, seed=self.seed, prompt_tokens=self.prompt_tokens,
            gen_time_s=end.elapsed_s, first_frame_s=self.first or 0.0, settings=self.settings,
            ended_by=end.done, entropy=self.entropy, nll=self.nll, force_stop=self.force_stop,
        )
