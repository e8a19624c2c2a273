"""Gepard on this machine: gepard_demo's engine and codec, batched or streamed.

- `GepardLocal` (`--engine local`): a run's utterances through one running batch of up to
  `--batch-size` rows (gepard_demo.batching: a finished row's place goes to the next utterance
  at once, no batch waits for its slowest row), each decoded by the codec's whole decode as it
  ends, then `apply_end_of_speech` (fade / silence from StreamSettings). `synthesize` (a fixed
  batch through `GepardEngine.generate`) is what a GPU call and the sweeps use.
- `GepardStreaming` (`--engine local-stream`): each utterance through gepard_demo's
  `SynthesisSession`, the very path the app plays: the audio is the streamed audio (chunking,
  decode mode, lookback, fade, silence all apply) and ttfa_s is measured, not estimated. One
  utterance at a time (batch_size is ignored): a listener alone.

Timing fields are defined in eval/engines/base.py.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from eval.engines.base import EvalEngine, SpeechEngine, Synthesis
from eval.engines.request import SynthesisItem, VoiceRef, refs_of
from gepard_demo.settings import SamplingSettings, StreamSettings

if TYPE_CHECKING:
    from collections.abc import Iterator

    import torch

    from gepard_demo.model.seams import AudioCodec, Engine
    from gepard_demo.streaming.seams import TurnLock

# Per item, its speaker prefix (None: the default voice); None for the whole batch: all default.
Speakers = list["torch.Tensor | None"] | None


class GepardLocal(EvalEngine):
    """gepard_demo's engine + codec on this machine; generates a whole batch at once."""

    name = "local"

    def __init__(self, engine: Engine, codec: AudioCodec):
        self.engine = engine
        self.codec = codec
        self._prefixer = None  # built on the first reference voice

    def speakers(self, items: list[SynthesisItem]) -> Speakers:
        """Speaker prefixes for the items' reference recordings and saved voices (None: the default voice)."""
        refs = refs_of(items)
        if refs is None:
            return None
        return [None if r is None else r.prefix() if isinstance(r, VoiceRef) else self._prefixer_().from_file(r).tokens
                for r in refs]

    def _prefixer_(self):
        """The compressor's prefixer, built on the first reference recording."""
        if self._prefixer is None:
            from gepard_demo.codec.source import resolve_codec_source
            from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

            self._prefixer = SpeakerPrefixer.for_engine(self.engine, resolve_codec_source(self.engine.codec_source()))
        return self._prefixer

    @classmethod
    def load(cls, model: str, device: str = "cpu", cache_dir: str | None = None) -> "GepardLocal":
        """On a GPU at the demo's precision (bf16 from compute capability 8.0, fp16 below; heads
        fp32), so a GPU eval scores what the demo plays; fp32 on a CPU."""
        from gepard_demo.codec import load_codec
        from gepard_demo.model.engine import GepardEngine
        from gepard_demo.speed.select import load_dtype

        engine = GepardEngine.load(model, device=device, dtype=load_dtype(device, "auto"), cache_dir=cache_dir)
        engine.use_loop("auto")  # the demo's decode loop: CUDA graphs on a GPU (model/fixed_shape/choice.py)
        engine.warm()
        return cls(engine, load_codec(engine.codec_source(), device=device))

    def describe(self) -> dict:
        info = self.engine.model_info
        return {
            "engine": self.name, "model": info.name, "model_path": info.path,
            "revision": info.revision, "random_weights": info.random_weights,
            "device": info.device, "dtype": info.dtype, "codec_source": self.engine.codec_source(),
        }

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        return self.synthesize_with(items, sampling, stream, self.speakers(items))

    def synthesize_with(self, items: list[SynthesisItem], sampling: SamplingSettings, stream: StreamSettings,
                        speakers: Speakers = None) -> list[Synthesis]:
        """synthesize() with the items' speaker prefixes already made (None: the default voice)."""
        settings = [sampling.replace(seed=item.seed) for item in items]
        results = self.engine.generate([item.text for item in items], settings, speakers=speakers)
        return [self.synthesis(item.text, r, stream) for item, r in zip(items, results)]

    def gepard(self) -> Engine:
        return self.engine

    def trace_source(self) -> tuple[SpeechEngine, TurnLock | None] | None:
        return self, None

    def synthesize_each(self, items: list[SynthesisItem], sampling: SamplingSettings, stream: StreamSettings,
                        batch_size: int = 4) -> Iterator[tuple[int, Synthesis]]:
        """(index, Synthesis) of each utterance as it ends: all of them through one running batch
        of up to batch_size rows (gepard_demo.batching), a finished row's place going to the next
        utterance at once, and each decoded here while the batch runs on. The rows equal
        `synthesize`'s up to the last bits batching may change in the logits (facts §3)."""
        from gepard_demo.batching.scheduler import BatchScheduler
        from gepard_demo.host_settings import BatchingSettings

        speakers = self.speakers(items)
        texts = [item.text for item in items]
        settings = [sampling.replace(seed=item.seed) for item in items]
        shared = isinstance(self.engine, BatchScheduler)  # the app's: its callers share it
        scheduler = self.engine if isinstance(self.engine, BatchScheduler) else BatchScheduler(
            self.engine, BatchingSettings(max_batch=batch_size, admission="cap"))
        try:
            for i, r in scheduler.generate_each(texts, settings, speakers):
                yield i, self.synthesis(texts[i], r, stream)
        finally:
            if not shared:
                scheduler.close()

    def synthesis(self, text, r, stream) -> Synthesis:
        """One GenerationResult decoded and shaped (the codec's whole decode, then fade and silence)."""
        from gepard_demo.codec import apply_end_of_speech

        t0 = time.perf_counter()
        audio = self.codec.decode(r.frames)
        audio = apply_end_of_speech(audio, self.codec.sample_rate, stream.fade_ms, stream.silence_ms)
        decode_s = time.perf_counter() - t0
        return Synthesis(
            audio=np.asarray(audio, np.float32), sample_rate=self.codec.sample_rate,
            frames=r.num_frames, stop_frame=r.stop_frame, p_stop=[float(p) for p in r.p_stop], seed=r.seed,
            gen_s=r.gen_time_s, decode_s=decode_s, ttfa_s=self.ttfa_estimate(r, stream),
            codes=r.frames.numpy().astype(np.int16), text_tokens=self.text_tokens(text),
            ended_by=r.ended_by, force_stop=r.force_stop,
            entropy=[float(h) for h in r.entropy], nll=[float(x) for x in r.nll],
        )

    def text_tokens(self, text: str) -> int:
        """Tokens of the text itself (the prompt repeats a short one; this counts it once)."""
        from gepard_demo.model.prompt import encode_text

        return len(encode_text(text, self.engine.tokenizer))

    def ttfa_estimate(self, r, stream: StreamSettings) -> float:
        """ttfa_s of a batch row (eval/engines/base.py): its first chunk's last frame, estimated from
        the row's steady step rate, plus the measured decode of those frames alone."""
        k = min(stream.first_chunk_frames, r.num_frames)
        step = (r.gen_time_s - r.first_frame_s) / max(len(r.p_stop) - 1, 1)
        dec = self.codec.streamer(mode=stream.decode_mode, lookback=stream.lookback_frames)
        t0 = time.perf_counter()
        dec.push(r.frames[:k])
        return r.first_frame_s + (k - 1) * step + (time.perf_counter() - t0)


def synthesize_resident(resident, items: list[SynthesisItem], sampling: SamplingSettings, stream: StreamSettings,
                        speakers: Speakers = None) -> list[Synthesis]:
    """One eval batch inside a GPU call (gepard_demo/zerogpu: a module-level function, so the call
    pickles it by name): GepardLocal on the engine and codec the GPU holds; `speakers` made outside."""
    return GepardLocal(resident.engine, resident.codec).synthesize_with(items, sampling, stream, speakers)


class GepardStreaming(GepardLocal):
    """The app's streaming path: each utterance a SynthesisSession, as a visitor's would be."""

    name = "local-stream"

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        speakers = self.speakers(items) or [None] * len(items)
        return [self.stream_one(item.text, item.seed, speaker, sampling, stream)
                for item, speaker in zip(items, speakers)]

    # One visitor at a time: what the app's path gives a listener alone (ttfa_s measured so);
    # several at once is benchmarks/concurrency.py's: the base's batch-by-batch loop.
    synthesize_each = EvalEngine.synthesize_each

    def trace_source(self) -> tuple[SpeechEngine, TurnLock | None] | None:
        return None  # a sweep streams every point as a visitor would hear it

    @staticmethod
    def _cap(sampling, text: str, segments: int) -> int | None:
        """The force stop the utterance ran under ("auto" resolved); None when off, or when a long
        text was split into segments (each has its own cap)."""
        from gepard_demo.model.guards.guardrails import force_stop_for

        return force_stop_for(sampling, text) if segments == 1 else None

    def stream_one(self, text, seed, speaker, sampling, stream) -> Synthesis:
        from gepard_demo.streaming.session import SynthesisSession
        from gepard_demo.streaming.seams import SessionRequest

        session = SynthesisSession(
            self.engine, self.codec, SessionRequest(text, sampling.replace(seed=seed), stream, speaker=speaker)
        )
        audio = session.run()
        st = session.stats
        return Synthesis(
            audio=np.asarray(audio, np.float32), sample_rate=self.codec.sample_rate, frames=st.frames, stop_frame=st.stop_frame,
            p_stop=[float(p) for p in st.p_stop], seed=st.seed, gen_s=st.gen_time_s,
            decode_s=st.decode_time_s, ttfa_s=st.ttfa_s if st.ttfa_s is not None else st.wall_s,
            codes=session.codes(), text_tokens=self.text_tokens(text),
            ended_by=st.outcome, force_stop=self._cap(sampling, text, st.segments),
            entropy=[float(h) for h in st.entropy], nll=[float(x) for x in st.nll],
        )


if TYPE_CHECKING:
    _GepardLocal_is_a_SpeechEngine: type[SpeechEngine] = GepardLocal
    _GepardStreaming_is_a_SpeechEngine: type[SpeechEngine] = GepardStreaming
