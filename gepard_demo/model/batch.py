"""A running decode batch that requests join between steps and leave as soon as they end.

`DecodeBatch` is the loop of generation.py taken apart at its step boundary, so a scheduler can
add a request while others are mid-utterance (continuous batching):

    batch = DecodeBatch(talker)
    handles = batch.admit([BatchRequest(prompt, sampler), ...])   # prefill, join the cache
    while batch:
        events = batch.sample()     # (handle, FrameStep) for every request: one frame each
        ...                         # hand the frames out; batch.cancel(handle) any time here
        batch.advance()             # drop finished / cancelled rows, one backbone step for the rest

Joining: the newcomers are prefilled together in a cache of their own (left-padded to their
longest prompt, as generation.py always did), then their rows are appended to the running cache
(cache_rows.py: the shorter side is left-padded, the padding masked). A request's positions,
mask and linear-attention states are those of its solo run; its noise comes from its own
generator (sampling.py). So a seeded request makes the frames of its solo run whoever joins or
leaves, up to the last bits batched matmuls may change in the logits (facts §3), which decide a
frame only where two codes are within rounding of each other.

Leaving: a finished request's rows are dropped at the next `advance`, a cancelled one's too; the
padding columns no remaining row uses are trimmed, so a request left alone steps exactly as a
solo run (no mask at all).

Stop semantics, guidance rows and speaker prefixes are generation.py's (its module docstring).
Each method enters inference mode for its own work only: a caller may run them from any thread.

Guardrails (guardrails.py): a row with a repetition penalty keeps its window of committed frames
(replayed frames included, so a segment continued in another GPU call keeps its window), and
`sample` penalizes its logits after guidance; a row with a force stop ends, reported as
"force_stop", on the step that commits its force_stop-th frame (the runner breaks before the next
step, so the frames are the same), unless that frame also spends the budget, which the runner
reports first. The probe (probe.py) reads every row's belief inside the same step.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Protocol

import torch
from transformers import DynamicCache

from gepard_demo.model.guards.ending import BUDGET, FORCE_STOP, STOP
from gepard_demo.model.guards.penalty import History
from gepard_demo.model.guards.probe import belief

from .cache_rows import append_rows, left_pad, select_rows, trim_left
from .generation import FrameStep, guide_logits, padding_mask
from .sampling import RowSampler, sample_codes
from .talker import GepardTalker


@dataclass
class BatchRequest:
    prompt: list[int]
    sampler: RowSampler
    unconditional: list[int] | None = None  # the guidance branch's prompt (None: unguided)
    speaker: torch.Tensor | None = None  # (K, hidden) speaker prefix (None: null_prefix)
    # (n, 32) frames this request already committed (another GPU call made them): it goes on from
    # frame n. Its sampler must have drawn the noise of those n frames (RowSampler.skip).
    replay: torch.Tensor | None = None

    @property
    def resumed_from(self) -> int:
        """The frames it goes on from (0: a fresh request); requests admitted together share it."""
        return 0 if self.replay is None else len(self.replay)


class DecodeLoop(Protocol):
    """A running decode batch: DecodeBatch here (its cache grows with the rows), or the fixed-shape
    loop (model/fixed_shape/fixed_batch.py, a CUDA graph per step). The scheduler, the engine and a ZeroGPU
    call drive either one through these calls, in this order per step: admit (between steps),
    sample, cancel (any time), advance; close when done with it."""

    steps: int  # samples taken: the clock FrameStep.batch_step reads

    def __len__(self) -> int: ...

    @property
    def row_count(self) -> int: ...

    def admit(self, requests: list[BatchRequest]) -> list[int]: ...

    def sample(self) -> list[tuple[int, FrameStep]]: ...

    def cancel(self, handle: int) -> None: ...

    def advance(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class _Live:
    """What the batch knows of one request between steps."""

    sampler: RowSampler
    guided: bool
    start: float  # perf_counter at admission: FrameStep.elapsed_s counts from here
    committed: int = 0
    done: bool = False
    cancelled: bool = False
    codes: torch.Tensor | None = field(default=None, repr=False)  # the frame to feed back next


@dataclass
class _Tensors:
    """The running rows' tensors, one row each: made together, dropped together."""

    cache: DynamicCache
    mask: torch.Tensor  # (rows, T) 1 = a real position
    last_pos: torch.Tensor  # (rows,) position of each row's last input
    hidden: torch.Tensor  # (rows, hidden) what the next sample reads


class DecodeBatch:
    def __init__(self, talker: GepardTalker):
        self.talker = talker
        self.tensors: _Tensors | None = None  # None while the batch has no rows
        self.rows: list[tuple[int, bool]] = []  # batch row -> (handle, is the guidance row)
        self.live: dict[int, _Live] = {}
        self._next_handle = 0
        self._sampled = False  # sample() ran and advance() has not yet
        self.steps = 0  # samples taken: the clock FrameStep.batch_step reads

    def __len__(self) -> int:
        """Requests in the batch (a guided one counts once)."""
        return len(self.live)

    @property
    def row_count(self) -> int:
        """Backbone rows a step computes (a guided request is two until its guidance ends)."""
        return len(self.rows)

    # -- joining -------------------------------------------------------------------------

    def admit(self, requests: list[BatchRequest]) -> list[int]:
        """Prefill `requests` and add them to the batch; returns their handles. Call between
        `advance` and the next `sample` (or on an empty batch)."""
        if self._sampled:
            raise RuntimeError("admit between steps: after advance(), before sample()")
        if not requests:
            return []
        handles = list(range(self._next_handle, self._next_handle + len(requests)))
        self._next_handle += len(requests)
        by_handle = dict(zip(handles, requests))
        done = prefill(self.talker, by_handle)
        with torch.inference_mode():
            self._join(_Tensors(done.cache, done.mask, done.last_pos, done.hidden))
        rows = done.rows
        now = time.perf_counter()
        guided = {h for h, unc in rows if unc}
        for h in handles:
            request = by_handle[h]
            keep_history(request, self.talker.logits_shape, self.talker.device)
            self.live[h] = _Live(sampler=request.sampler, guided=h in guided, start=now, committed=done.replayed)
        self.rows += rows
        return handles

    def _join(self, new: _Tensors) -> None:
        if (t := self.tensors) is None:
            self.tensors = new
            return
        have, width = t.mask.shape[1], new.mask.shape[1]
        if have < width:
            left_pad(t.cache, width - have)
            t.mask = torch.nn.functional.pad(t.mask, (width - have, 0))
        elif width < have:
            left_pad(new.cache, have - width)
            new.mask = torch.nn.functional.pad(new.mask, (have - width, 0))
        append_rows(t.cache, new.cache)
        t.mask = torch.cat([t.mask, new.mask])
        t.last_pos = torch.cat([t.last_pos, new.last_pos])
        t.hidden = torch.cat([t.hidden, new.hidden])

    # -- one step --------------------------------------------------------------------------

    def sample(self) -> list[tuple[int, FrameStep]]:
        """One frame (or the stop) for every request, from the hidden states of the last step."""
        if self._sampled:
            raise RuntimeError("sample() twice without advance()")
        if not self.rows or self.tensors is None:
            return []
        self._sampled = True
        device = self.talker.device
        with torch.inference_mode():
            logits, p_stop = self.talker.head_logits(self.tensors.hidden)
            cond_rows = [r for r, (_, unc) in enumerate(self.rows) if not unc]
            handles = [self.rows[r][0] for r in cond_rows]
            if len(cond_rows) < len(self.rows):
                slot = {h: k for k, h in enumerate(handles)}
                unc_rows = [r for r, (_, unc) in enumerate(self.rows) if unc]
                guided = torch.tensor([slot[self.rows[r][0]] for r in unc_rows], device=device)
                scale = torch.tensor([self.live[self.rows[r][0]].sampler.settings.cfg_scale for r in unc_rows], device=device)
                cond_logits = logits[cond_rows]
                cond_logits[guided] = guide_logits(cond_logits[guided], logits[unc_rows], scale)
                logits, p_stop = cond_logits, p_stop[cond_rows]
            codes = sample_codes(logits, [self.live[h].sampler for h in handles])
            entropy, nll = belief(logits, codes)  # the guided, unpenalized logits: the model's belief
            p_list = p_stop.tolist()  # the conditional rows': the stop is judged there
            h_list, nll_list = entropy.tolist(), nll.tolist()
            codes_cpu = codes.cpu().unbind(0)
        now = time.perf_counter()
        clock = self.steps
        self.steps += 1
        events = []
        for k, h in enumerate(handles):
            st = self.live[h]
            settings = st.sampler.settings
            elapsed = now - st.start
            if st.committed > 0 and p_list[k] > settings.stop_threshold:
                st.done = True
                events.append((h, FrameStep(st.committed, None, p_list[k], elapsed, STOP, clock, h_list[k])))
                continue
            st.committed += 1
            st.codes = codes[k]
            if st.sampler.history is not None:
                st.sampler.history.add(codes[k])
            force = st.sampler.force_stop
            done = (BUDGET if st.committed >= settings.max_frames
                    else FORCE_STOP if force is not None and st.committed >= force else None)
            st.done = done is not None
            events.append((h, FrameStep(st.committed - 1, codes_cpu[k], p_list[k], elapsed, done, clock,
                                        h_list[k], nll_list[k])))
        return events

    def cancel(self, handle: int) -> None:
        """End a request: its rows leave at the next `advance` (or now, between steps)."""
        if handle in self.live:
            self.live[handle].cancelled = True
            if not self._sampled:
                self._drop()

    def advance(self) -> None:
        """Drop what ended, then one backbone step for the rest (fed the frames just sampled)."""
        if not self._sampled:
            raise RuntimeError("advance() before sample()")
        self._sampled = False
        self._drop()
        if not self.rows or (t := self.tensors) is None:
            return
        device = self.talker.device
        with torch.inference_mode():
            codes = torch.stack([_fed(self.live[h]) for h, _ in self.rows])
            t.mask = torch.cat([t.mask, torch.ones(len(self.rows), 1, dtype=t.mask.dtype, device=device)], dim=1)
            t.last_pos = t.last_pos + 1
            step_embeds = self.talker.embed_frame(codes).unsqueeze(1)
            step_pos = t.last_pos.unsqueeze(1)
            padded = not bool(t.mask.all())
            t.hidden = self.talker.backbone(
                step_embeds,
                attention_mask=padding_mask(self.talker, t.mask, step_embeds, step_pos, t.cache) if padded else None,
                position_ids=step_pos, past_key_values=t.cache,
            )

    def close(self) -> None:
        """End every request and free the cache (the batch may admit again after)."""
        self.live.clear()
        self.rows, self.tensors = [], None
        self._sampled = False

    def _drop(self) -> None:
        """Remove ended and cancelled requests' rows, and guidance rows past their cfg_frames."""
        def keeps(h: int, unc: bool) -> bool:
            st = self.live[h]
            if st.done or st.cancelled:
                return False
            frames = st.sampler.settings.cfg_frames
            return not (unc and frames is not None and st.committed >= frames)

        keep = [r for r, (h, unc) in enumerate(self.rows) if keeps(h, unc)]
        for h in [h for h, st in self.live.items() if st.done or st.cancelled]:
            del self.live[h]
        if len(keep) == len(self.rows):
            return
        if not keep or (t := self.tensors) is None:
            self.rows, self.tensors = [], None
            return
        with torch.inference_mode():
            index = torch.tensor(keep, device=self.talker.device)
            select_rows(t.cache, index)
            t.mask, t.last_pos, t.hidden = t.mask[index], t.last_pos[index], t.hidden[index]
            self.rows = [self.rows[r] for r in keep]
            # Padding no remaining row needs: a row left alone steps as it would solo.
            unused = int(t.mask.any(0).long().argmax())
            if unused > 0:
                trim_left(t.cache, unused)
                t.mask = t.mask[:, unused:]


def _fed(st: _Live) -> torch.Tensor:
    assert st.codes is not None, "advance() feeds back only the frames sample() committed"
    return st.codes


@dataclass
class Prefilled:
    """A group of requests prefilled together (`prefill`): their rows, left-padded to one width."""

    rows: list[tuple[int, bool]]  # (handle, is the guidance row), conditional rows first
    cache: DynamicCache
    mask: torch.Tensor  # (rows, T) 1 = a real position
    last_pos: torch.Tensor  # (rows,) position of each row's last input
    hidden: torch.Tensor  # (rows, hidden) what the first sample reads
    replayed: int  # the committed frames the group goes on from (BatchRequest.replay)


def prefill(talker: GepardTalker, requests: dict[int, BatchRequest]) -> Prefilled:
    """Prefill `requests` (by handle) in a cache of their own: a guided request's guidance row
    after every conditional row, each row left-padded to the longest prompt, its replayed frames
    (if any) fed after its prompt. Both decode loops (DecodeBatch, model/fixed_shape/fixed_batch.py) join
    their newcomers from this."""
    device = talker.device
    replayed = _replayed(list(requests.values()))
    rows = [(h, False) for h in requests] + [(h, True) for h, r in requests.items()
                                             if r.unconditional is not None and _still_guided(r, replayed)]
    prompts = [_prompt(requests[h], unc) for h, unc in rows]
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(rows), width, dtype=torch.long, device=device)
    mask = torch.zeros(len(rows), width + replayed, dtype=torch.long, device=device)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):] = torch.tensor(p, device=device)
        mask[r, width - len(p):] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    speakers = [requests[h].speaker for h, _ in rows]
    speaker_rows = None
    if any(s is not None for s in speakers):
        speaker_rows = torch.stack([talker.null_prefix if s is None else s.to(device) for s in speakers])
    cache = DynamicCache(config=talker.config.backbone)
    with torch.inference_mode():
        embeds = talker.embed_prompt(ids, speaker_rows)
        if replayed:  # the frames made before, fed after the prompt in the same prefill
            # Every row's (_replayed: a group goes on from one frame count, so none lacks them).
            frames = torch.stack([f for h, _ in rows if (f := requests[h].replay) is not None]).to(device)
            fed = talker.embed_frame(frames.flatten(0, 1)).view(len(rows), replayed, -1)
            embeds = torch.cat([embeds, fed.to(embeds.dtype)], dim=1)
        padded = bool((mask == 0).any())  # a padding-free prefill needs no mask: the fast path
        hidden = talker.backbone(
            embeds, attention_mask=padding_mask(talker, mask, embeds, positions, cache) if padded else None,
            position_ids=positions, past_key_values=cache,
        )
    return Prefilled(rows, cache, mask, positions[:, -1], hidden, replayed)


def _prompt(request: BatchRequest, unconditional: bool) -> list[int]:
    """A row's prompt: the request's, or its guidance branch's (prefill makes that row for a guided one)."""
    prompt = request.unconditional if unconditional else request.prompt
    assert prompt is not None
    return prompt


def _replayed(requests: list[BatchRequest]) -> int:
    """How many committed frames the group's requests go on from (0: a fresh start). Requests
    prefilled together share it: their frames then end their prefills at one length."""
    counts = {0 if r.replay is None else len(r.replay) for r in requests}
    if len(counts) > 1:
        raise ValueError(f"requests admitted together go on from different frame counts: {sorted(counts)}")
    return counts.pop()


def keep_history(request: BatchRequest, shape: torch.Size, device: torch.device) -> None:
    """A penalized request's window, holding the frames it goes on from (replay) if any."""
    sampler = request.sampler
    if not sampler.settings.penalized or sampler.history is not None:
        return
    sampler.history = History(sampler.settings.repetition_window, shape, device)
    if request.replay is not None:
        for codes in request.replay.to(device):
            sampler.history.add(codes)


def _still_guided(request: BatchRequest, replayed: int) -> bool:
    """A guidance row joins unless its request's cfg_frames were all made before."""
    frames = request.sampler.settings.cfg_frames
    return frames is None or replayed < frames


def decode_batch(batch: DecodeLoop, requests: list[BatchRequest]) -> Generator[tuple[int, FrameStep]]:
    """Yield (request, FrameStep) for every request at every step until each is done: a fixed
    set of requests (GepardEngine.request: all resumed from the same frame count) through one
    DecodeLoop (`engine.generate`, `engine.stream_frames`). A guided request's unconditional
    branch runs as one more row of the same batch, with its own positions, fed the frames the
    conditional row commits, until its `cfg_frames` are made. Closing the iterator stops the
    work at the next step (the demo's Stop button).
    """
    handles = batch.admit(requests)
    index = {h: i for i, h in enumerate(handles)}
    # The batch enters inference mode per method, never across this yield: a consumer may resume
    # the generator from another thread (the pipeline's talker thread, a GPU call's worker), and
    # inference mode is a per-thread switch.
    try:
        while batch:
            for h, step in batch.sample():
                yield index[h], step
            batch.advance()
    finally:
        batch.close()  # a closed stream (Stop, a hang-up) gives back what its rows held
