"""GepardEngine: tokenizer + config + talker, from a checkpoint in the published layout.

`generate` runs several requests as one batch (evaluation throughput); `stream_frames` yields
one request's frames as they are made (the streaming demo). Both go through the same loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collections.abc import Iterator
from pathlib import Path

import torch
from transformers import AutoTokenizer

from gepard_demo.model.checkpoints.source import ResolvedModel, resolve_model
from gepard_demo.model.fixed_shape.choice import DYNAMIC, LoopChoice, choose_loop
from gepard_demo.model.fixed_shape.fixed_batch import FixedBatch
from gepard_demo.model.fixed_shape.shapes import WARM_ROWS, Capture, StepShapes
from gepard_demo.model.guards.guardrails import force_stop_for
from gepard_demo.settings import SamplingSettings
from gepard_demo.text.front_end import shared as front_end
from gepard_demo.text.front_end import spoken_for

from .batch import BatchRequest, DecodeBatch, DecodeLoop, decode_batch
from .config import GepardConfig
from .frames import EngineFrames, FrameMaker
from .generation import FrameStep, GenerationResult, ResultBuilder, full_attention_only
from .memory import check_fits
from .request import FrameRequest
from .prompt import build_prompt_ids, build_unconditional_prompt_ids, encode_text
from .sampling import RowSampler
from .seams import ModelInfo
from .talker import GepardTalker, config_for_checkpoint

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class GepardEngine(FrameMaker):
    def __init__(self, config: GepardConfig, tokenizer, talker: GepardTalker, info: ModelInfo):
        self.config = config
        self.tokenizer = tokenizer
        self.talker = talker
        self.model_info = info
        self.loop: LoopChoice = DYNAMIC
        self.shapes: StepShapes | None = None  # the fixed-shape loop's buffers and graphs

    def use_loop(self, cuda_graphs: str) -> LoopChoice:
        """Run the decode loop the `cuda_graphs` setting picks for this engine's device and backbone
        from now on (model/fixed_shape/choice.py): every surface's batches come from `new_batch`."""
        loop = choose_loop(cuda_graphs, str(self.device), full_attention_only(self.config.backbone))
        self.loop = loop
        self.shapes = StepShapes(self.talker, loop.graphs, loop.required) if loop.fixed else None
        return loop

    def warm(self, rows: tuple[int, ...] = WARM_ROWS) -> list[Capture]:
        """Capture the decode step's graphs for batches of `rows` rows now (start-up, or a ZeroGPU
        worker's first call), at the columns a default request needs, so no request waits for a
        capture; returns what each cost. Nothing to do unless the loop runs CUDA graphs."""
        if self.shapes is None or not self.shapes.graphs:
            return []
        columns = len(self.prompt_ids("warm")) + self.default_sampling().max_frames
        return self.shapes.warm(list(rows), columns)

    def new_batch(self) -> DecodeLoop:
        """An empty running batch of the chosen loop: requests join it with `admit`."""
        return FixedBatch(self.shapes) if self.shapes is not None else DecodeBatch(self.talker)

    @classmethod
    def load(
        cls,
        model: str = "tiny",
        device: str = "cpu",
        dtype: torch.dtype | str = torch.float32,
        cache_dir: str | Path | None = None,
    ) -> "GepardEngine":
        """device "cpu" or "cuda[:n]"; dtype: what the backbone's layers compute in: float32
        (CPU: bf16 is 4-10x slower without AVX-512), bfloat16 on a GPU of compute capability 8.0
        or above, float16 below it (speed.select.precision_for picks). Embeddings, heads, the
        stop head, the frame embedding and sampling stay fp32 in every case."""
        resolved = resolve_model(model, cache_dir=cache_dir)
        return cls.from_resolved(resolved, device=device, dtype=dtype)

    @classmethod
    def from_resolved(cls, resolved: ResolvedModel, device: str = "cpu", dtype: torch.dtype | str = torch.float32) -> "GepardEngine":
        if isinstance(dtype, str):
            if dtype not in DTYPES:
                raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
            dtype = DTYPES[dtype]
        config = config_for_checkpoint(GepardConfig.from_dir(resolved.path), resolved.path)
        tokenizer = AutoTokenizer.from_pretrained(str(resolved.path))
        talker = GepardTalker(config)
        talker.load_checkpoint(resolved.path)
        # The layers compute in `dtype`; embeddings, heads, stop head and frame embedding stay
        # fp32 (they decide every sample). Frozen: nothing here trains, and a parameter that
        # asks for grad makes an inference tensor fail outside inference mode.
        talker = talker.set_backbone_dtype(dtype).to(device=device).requires_grad_(False).eval()
        info = ModelInfo(
            name=resolved.name,
            path=str(resolved.path),
            revision=resolved.revision,
            random_weights=resolved.random_weights,
            device=str(device),
            dtype=str(dtype).removeprefix("torch."),
        )
        return cls(config, tokenizer, talker, info)

    @property
    def device(self) -> torch.device:
        return self.talker.device

    def default_sampling(self) -> SamplingSettings:
        """The checkpoint's own operating point (gepard_config.json)."""
        return SamplingSettings(**self.config.operating_point)

    def codec_source(self) -> str:
        """What `load_codec` should open: a .nemo beside the weights, or the codec's hub id."""
        codec_id = self.config.codec.codec_id
        local = Path(self.model_info.path) / codec_id
        return str(local) if local.exists() else codec_id

    def prompt_ids(self, text: str, settings: SamplingSettings | None = None) -> list[int]:
        """The prompt for `text` as written (the text repeated when short, unless
        settings.text_repetition is off): read through the text front end first (gepard_demo/text:
        the lexicon, then settings.text_normalization), the one place every caller's text passes."""
        return self._prompt(self.spoken(text, settings), settings)

    def _prompt(self, spoken: str, settings: SamplingSettings | None) -> list[int]:
        repeat = settings is None or settings.text_repetition
        return build_prompt_ids(encode_text(spoken, self.tokenizer), self.config, repeat=repeat)

    @staticmethod
    def spoken(text: str, settings: SamplingSettings | None = None) -> str:
        """What the model reads for `text`: the front end's reading, as written when it is off."""
        if settings is None:
            return front_end().spoken(text)
        return spoken_for(text, settings.text_normalization, settings.lexicon_entries)

    def sampler(self, text: str, settings: SamplingSettings) -> RowSampler:
        """The request's RowSampler: its seed's generator, and its force stop for this text
        ("auto" scaled to it; SettingsError naming force_stop_frames where it cannot be)."""
        return RowSampler.create(settings, self.device, force_stop_for(settings, text))

    def unconditional_prompt(self, settings: SamplingSettings) -> list[int] | None:
        """The guidance branch's prompt when `settings` asks for guidance, else None."""
        return build_unconditional_prompt_ids(self.config) if settings.guided else None

    def request(self, text: str, settings: SamplingSettings, speaker: torch.Tensor | None = None,
                resume: torch.Tensor | None = None) -> BatchRequest:
        """One request for a DecodeBatch, the one way every caller makes it (this engine, the
        scheduler, a ZeroGPU call). resume: (n, 32) frames it already committed (an earlier GPU
        call or a preempted place made them, same text, settings and seed): its sampler skips
        their noise (RowSampler.skip) and its prefill takes them after the prompt, so it goes on
        from frame n as it would have (the last bits of the logits may differ from an
        uninterrupted run, as in any other batch shape: facts §3)."""
        said = self.spoken(text, settings)
        sampler = self.sampler(said, settings)  # "auto" scales to what is said
        if resume is not None and len(resume):
            sampler.skip(len(resume), self.talker.logits_shape, self.device)
        else:
            resume = None
        return BatchRequest(self._prompt(said, settings), sampler, self.unconditional_prompt(settings), speaker,
                            resume)

    def generate(
        self,
        texts: list[str],
        settings: SamplingSettings | list[SamplingSettings],
        speakers: list[torch.Tensor | None] | None = None,
    ) -> list[GenerationResult]:
        """Generate every text as one batch; each row finishes on its own.

        speakers: per text, a (K, hidden) speaker prefix (a reference voice); None = the default voice.
        """
        if isinstance(settings, SamplingSettings):
            settings = [settings] * len(texts)
        if len(settings) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(settings)} settings")
        if not texts:
            return []
        if speakers is not None and len(speakers) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(speakers)} speakers")
        requests = [self.request(t, s, sp) for t, s, sp in zip(texts, settings, speakers or [None] * len(texts))]
        rows = len(texts) + sum(1 for s in settings if s.guided)  # a guided request runs a second row
        check_fits(self, rows, max(len(r.prompt) for r in requests), max(s.max_frames for s in settings))
        builders = [ResultBuilder(t, r.sampler.seed, len(r.prompt), s, r.sampler.force_stop)
                    for t, r, s in zip(texts, requests, settings)]
        for row, step in decode_batch(self.new_batch(), requests):
            builders[row].add(step)
        return [b.result() for b in builders]

    def stream_frames(self, request: FrameRequest) -> EngineFrames:
        """One request's steps as they are made (a FrameSource); close it to cancel. Its speaker
        and resume are used; look_ahead and group mean nothing to an engine that runs one request
        at a time (its segments run one after another).

        Pass `sampling.with_concrete_seed()` to know the seed before the first frame.
        """
        return EngineFrames(self._steps(request.text, request.sampling, request.speaker, request.resume))

    def _steps(self, text: str, settings: SamplingSettings, speaker: torch.Tensor | None,
               resume: torch.Tensor | None) -> Iterator[FrameStep]:
        steps = decode_batch(self.new_batch(), [self.request(text, settings, speaker, resume)])
        try:
            for _, step in steps:
                yield step
        finally:
            steps.close()


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.model.seams import Engine

    _GepardEngine_is_a_Engine: type[Engine] = GepardEngine
