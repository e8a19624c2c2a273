"""Eval's served engine: a served Gepard (vLLM-Omni, or our `python -m gepard_demo serve`)
over the speech API, one server or a pool of them.

- `GepardServer`: one server; one streamed request per utterance (SSE: pcm deltas, s16le mono
  22050 Hz, then `speech.audio.done`), through gepard_demo's `SpeechClient`. It sends the seed,
  max_new_tokens (= max_frames) and, for a sentence with a reference voice (--ref-audio or the
  set's ref_audio column), vLLM-Omni's `ref_audio` field as a data URL of the file; our server
  clones with it, vLLM-Omni 0.30 refuses it for Gepard (HTTP 400: the run ends). A CFG scale
  other than 1 goes as our guidance extension fields, only to servers whose
  /v1/models entry says they take guidance (ours); vLLM-Omni would drop them unread, so such a
  run is refused before the first request instead of scoring unguided audio. Temperature,
  top-k, greedy, stop threshold and all stream settings are fixed per server, so non-default
  values are refused rather than silently ignored. The authors' guardrails go as our extension
  fields the same way (settings.EXTENSION_GROUPS): only to servers
  whose entry says `"guardrails": true`, else refused before the first request. Frames, the stop,
  runaways, how the run ended (ended_by, force_stopped) and the onset-entropy probe traces come
  from our server's `speech.audio.done` extension, or, from vLLM-Omni, from the audio's length against
  max_new_tokens (gepard_demo.serving.client.ServedEnd); there is no p_stop. A request the server fails (HTTP 5xx) is
  a row with `server_error` and no audio, counted in the failure table; the server stays.
- `ServerPool`: several servers (`--server-url` repeated or `--server-urls FILE`), each with
  `concurrency` requests in flight. Each utterance's seed depends only on (base seed, id), so
  the audio does not depend on which server made it or in what order: the rows equal a
  sequential run's (up to timings). A server that fails to connect, times out or breaks a
  stream is dropped and its utterance goes to the live ones; a request a server refuses
  (HTTP 4xx) would be refused by any, so it ends the run. With every server gone the run ends
  with `ServerError` (exit 2), and the rows finished so far are kept for a resume.

Timing (see eval/engines/base.py): ttfa_s = request sent -> first audio bytes; gen_s = the whole
request; decode_s = 0 (the server decodes inside gen_s). With concurrency > 1 these include
the server's queueing behind the other requests in flight.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import TYPE_CHECKING, Iterator

import numpy as np

from eval.engines.base import EngineError, EvalEngine, Synthesis
from eval.engines.request import SynthesisItem, VoiceRef
from gepard_demo.serving.client import (
    ServedEnd,
    ServedFeatures,
    SpeechClient,
    SpeechServerError,
    StreamResult,
    audio_data_url,
    extension_fields,
    no_extension_reason,
    unserved_extension,
)
from gepard_demo.declare import changed, served_as
from gepard_demo.serving.protocol import pcm16_to_float
from gepard_demo.settings import SamplingSettings, StreamSettings, fixed_by_server
from gepard_demo.units import SAMPLE_RATE

RESUME_HINT = ("Is it running (`python -m gepard_demo serve` or vLLM-Omni)? Finished rows are kept: "
               "rerun the same command (any --server-url) to resume.")


class ServerError(EngineError):
    """The server is unreachable, timed out, broke a stream or refused a request. kind: the
    client's (SpeechServerError.kind: "refused" means any server would refuse it), or None."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


def check_server_settings(sampling: SamplingSettings, stream: StreamSettings) -> None:
    """Refuse settings a served model cannot take per request (vLLM-Omni rejects extra_params):
    those it fixes when it starts (declare.SERVED), where they differ from the defaults."""
    fixed = [f"{k}={v}" for settings in (sampling, stream) for k, v in changed(settings).items()
             if k in served_as(type(settings), "fixed")]
    if fixed:
        raise ServerError(f"--engine server cannot set {', '.join(fixed)}: {fixed_by_server()} are fixed per server "
                          "(start the server with them); only the seed and --max-frames go with each request")


def extensions_for(servers: list["GepardServer"], sampling: SamplingSettings) -> dict:
    """Our extension fields every request carries ({} when guidance and guardrails are off);
    refused before the first request when a server does not list their group in /v1/models
    (vLLM-Omni would drop them unread, and the run would score unguided audio as guided)."""
    for server in servers:
        if (unserved := unserved_extension(sampling, server.features())) is not None:
            group, name, value = unserved
            raise ServerError(f"{name}={value}: the server at {server.url} {no_extension_reason(group)}, "
                              "so the audio would not be what the run says")
    return {k: v for fields in extension_fields(sampling).values() for k, v in fields.items()}


def _server_error(exc: SpeechServerError) -> ServerError:
    return ServerError(str(exc).replace("speech server at", "Gepard server at", 1) +
                       ("" if exc.kind == "refused" else ". " + RESUME_HINT), exc.kind)



def voice_fields(items: list[SynthesisItem]) -> list[dict]:
    """Per item, the fields that speak it in its voice: a recording as the `ref_audio` data URL
    (each file read once, however many utterances or servers use it), a saved voice by name
    (`voice`), or none (the default voice)."""
    refs = [item.ref for item in items]
    urls: dict[str, str] = {}
    for ref in dict.fromkeys(r for r in refs if isinstance(r, str)):
        try:
            urls[ref] = audio_data_url(ref)
        except OSError as e:
            raise EngineError(f"reference audio {ref}: {e.strerror or e}") from e
    return [{} if r is None else {"voice": r.name} if isinstance(r, VoiceRef) else {"ref_audio": urls[r]}
            for r in refs]


def check_voices(servers: list["GepardServer"], items: list[SynthesisItem]) -> None:
    """Every saved voice asked for is listed by every server, before the first request: a server
    that does not list it would refuse it, or speak the default voice instead (vLLM-Omni's Gepard)."""
    names = dict.fromkeys(item.ref.name for item in items if isinstance(item.ref, VoiceRef))
    for server in servers:
        for name in names:
            try:
                server.client.check_voice(name)
            except SpeechServerError as e:
                raise _server_error(e) from e


class GepardServer(EvalEngine):
    """A served Gepard over the speech API; one streamed request per utterance."""

    name = "server"

    def __init__(self, url: str, timeout: float = 60.0, transport=None):
        self.client = SpeechClient(url, timeout, transport)
        self.url = self.client.url
        self.timeout = timeout
        self._features: ServedFeatures | None = None

    def models(self) -> dict:
        try:
            return self.client.models()
        except SpeechServerError as e:
            raise _server_error(e) from e

    def served_model(self) -> str:
        return self._entry()["id"]

    def features(self) -> ServedFeatures:
        """What it takes beyond vLLM-Omni's protocol (read once)."""
        if self._features is None:
            self._entry()
        assert self._features is not None  # _entry() sets it or raises
        return self._features

    def _entry(self) -> dict:
        try:
            entry = self.client.model()
        except SpeechServerError as e:
            raise _server_error(e) from e
        self._features = ServedFeatures.of(entry)
        return entry

    def describe(self) -> dict:
        models = self.models()
        first = (models.get("data") or [{}])[0]
        return {"engine": self.name, "server_url": self.url, "model": first.get("id"),
                "random_weights": first.get("random_weights"), "models": models}

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        check_server_settings(sampling, stream)
        guidance = extensions_for([self], sampling)
        check_voices([self], items)
        voices = voice_fields(items)
        return [self.one(item.text, item.seed, sampling.max_frames, v, guidance) for item, v in zip(items, voices)]

    def one(self, text: str, seed: int, max_frames: int, voice: dict | None = None,
            guidance: dict | None = None, result: StreamResult | None = None) -> Synthesis:
        """One utterance; `voice`: its voice's fields (voice_fields);
        `guidance`: extensions_for's fields; `result`: its `hang_up()` ends the request from
        another thread (what it returns then is cut short: the caller drops it)."""
        result = result or StreamResult()
        done: dict = {}  # the server's done event, filled by the stream
        t0 = time.perf_counter()
        try:
            parts = list(self.client.stream(text, seed=seed, max_new_tokens=max_frames, mode="sse", result=result,
                                            guidance=guidance, done=done, **(voice or {})))
        except SpeechServerError as e:
            if (e.status or 0) >= 500:  # the server failed this request: a row that says so, not a dead server
                return Synthesis(audio=np.zeros(0, np.float32), sample_rate=SAMPLE_RATE, frames=None,
                                 stop_frame=None, p_stop=None, seed=seed,
                                 gen_s=time.perf_counter() - t0, decode_s=0.0, ttfa_s=time.perf_counter() - t0,
                                 error=str(e))
            raise _server_error(e) from e
        gen_s = time.perf_counter() - t0
        pcm = np.concatenate(parts) if parts else np.zeros(0, "<i2")
        end = ServedEnd.read(done, len(pcm), max_frames)
        # /32768: libsndfile's scale, so the run's 16-bit WAV holds the server's exact samples.
        return Synthesis(audio=pcm16_to_float(pcm), sample_rate=SAMPLE_RATE, frames=end.frames,
                         stop_frame=end.stop_frame, p_stop=None, seed=seed, gen_s=gen_s, decode_s=0.0,
                         ttfa_s=result.ttfa_s if result.ttfa_s is not None else gen_s, ended_by=end.ended_by,
                         entropy=end.entropy, nll=end.nll)


class ServerPool(EvalEngine):
    """Utterances fanned out over several servers, `concurrency` requests in flight on each."""

    name = "server"

    def __init__(self, servers: list[GepardServer], concurrency: int = 1):
        if not servers:
            raise ServerError("--engine server needs at least one --server-url")
        if concurrency < 1:
            raise ServerError(f"--concurrency must be >= 1, got {concurrency}")
        self.servers = servers
        self.concurrency = concurrency
        self.dead: dict[str, str] = {}  # url -> why it was dropped

    @property
    def url(self) -> str:
        return self.servers[0].url

    def describe(self) -> dict:
        described = [s.describe() if s.url not in self.dead else {"server_url": s.url, "left_out": self.dead[s.url]}
                     for s in self.servers]
        live = next(d for d in described if "left_out" not in d)
        return {**live, "server_urls": [s.url for s in self.servers], "concurrency": self.concurrency,
                "servers": described}

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        out: list[Synthesis | None] = [None] * len(items)
        for i, s in self.synthesize_each(items, sampling, stream):
            out[i] = s
        return [s for s in out if s is not None]  # every index is yielded, or synthesize_each raised

    def synthesize_each(self, items: list[SynthesisItem], sampling: SamplingSettings, stream: StreamSettings,
                        batch_size: int = 4) -> Iterator[tuple[int, Synthesis]]:
        """(index, result) as each item finishes, in any order. Raises ServerError once no
        server is left (after yielding everything that finished) or when a request is refused.
        An item's `ref`: the voice its request asks for (voice_fields).
        batch_size: not used: a pool's requests in flight are `concurrency` per server."""
        check_server_settings(sampling, stream)
        live = [s for s in self.servers if s.url not in self.dead]
        guidance = extensions_for(live, sampling)
        check_voices(live, items)
        voices = voice_fields(items)
        work: queue.Queue = queue.Queue()
        for i, item in enumerate(items):
            work.put((i, (item.text, item.seed, voices[i])))
        done: queue.Queue = queue.Queue()
        stop = threading.Event()
        lock = threading.Lock()
        left = len(items)
        in_flight: set[StreamResult] = set()  # hung up when the consumer stops, so no server keeps them

        outstanding = [len(items)]  # utterances not finished yet (queued or in flight)

        def slot(server: GepardServer) -> None:
            while not stop.is_set() and server.url not in self.dead:
                try:
                    i, (text, seed, voice) = work.get(timeout=0.1)
                except queue.Empty:
                    with lock:
                        if not outstanding[0]:
                            return
                    continue  # another slot may still hand an utterance back
                call = StreamResult()
                with lock:
                    if stop.is_set():
                        return
                    in_flight.add(call)
                try:
                    result = server.one(text, seed, sampling.max_frames, voice, guidance, call)
                except ServerError as e:
                    if e.kind == "refused":
                        done.put((i, None, e))  # any server would refuse it: the run stops
                        return
                    with lock:
                        self.dead.setdefault(server.url, str(e))
                    work.put((i, (text, seed, voice)))  # a live server takes it
                    return
                except BaseException as e:  # noqa: BLE001  reported by the consumer
                    done.put((i, None, e))
                    return
                finally:
                    with lock:
                        in_flight.discard(call)
                with lock:
                    outstanding[0] -= 1
                done.put((i, result, None))

        threads = [threading.Thread(target=slot, args=(s,), daemon=True, name=f"eval-server-{k}")
                   for s in self.servers if s.url not in self.dead for k in range(self.concurrency)]
        for t in threads:
            t.start()
        try:
            while left:
                try:
                    i, result, error = done.get(timeout=0.2)
                except queue.Empty:
                    if not any(t.is_alive() for t in threads):
                        if done.empty():
                            raise self._all_dead(left)
                    continue
                if error is not None:
                    raise error
                left -= 1
                yield i, result
        finally:  # the run ended or was stopped (an error, Ctrl-C, a closed Eval tab)
            with lock:
                stop.set()
                calls = list(in_flight)
            for call in calls:
                call.hang_up()

    def _all_dead(self, left: int) -> ServerError:
        why = "; ".join(f"{url}: {msg.split(': ', 2)[-1][:160]}" for url, msg in self.dead.items())
        err = ServerError(f"every Gepard server is gone ({len(self.dead)}/{len(self.servers)}), {left} utterance(s) "
                          f"left: {why}. {RESUME_HINT}")
        err.kind = "connect"
        return err


def load_server_engine(urls: list[str] | tuple[str, ...], model: str, timeout: float = 60.0,
                       concurrency: int = 1, log=print) -> ServerPool:
    """The pool for a run. Every server that answers must serve `model`; one that does not
    answer is left out (with a line in the log) as long as another one does."""
    pool = ServerPool([GepardServer(u, timeout) for u in urls], concurrency)
    errors = []
    for server in pool.servers:
        try:
            served = server.served_model()
        except ServerError as e:
            errors.append(e)
            pool.dead[server.url] = str(e)
            # The run goes on with the others: the error's "rerun to resume" would not be true here.
            log(f"left out, the run goes on without it: {str(e).removesuffix('. ' + RESUME_HINT)}")
            continue
        if model != served:  # a resumed run must keep scoring the model it started with
            raise ServerError(f"Gepard server at {server.url} serves {served!r}, but this run is for {model!r}")
    if len(errors) == len(pool.servers):
        raise errors[0]
    return pool


if TYPE_CHECKING:
    from eval.engines.base import SpeechEngine

    _GepardServer_is_a_SpeechEngine: type[SpeechEngine] = GepardServer
    _ServerPool_is_a_SpeechEngine: type[SpeechEngine] = ServerPool
