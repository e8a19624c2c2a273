"""The speech server's Prometheus metrics (`GET /metrics`), one CollectorRegistry per server.

Named as vLLM names them where vLLM has the figure (vllm/v1/metrics/loggers.py), with its
`model_name` label:
- `vllm:num_requests_running` / `vllm:num_requests_waiting`: the BatchScheduler's running batch
  and queue, read at each scrape (a request counts from its first frame asked for to its end).
- `vllm:request_success_total{finished_reason}`: every request that ended, by how: "stop" (the
  stop head), "length" (its max_new_tokens budget), "force_stop" (the authors' guard cut a
  runaway; ours, model/guards/ending.py), "abort" (the client hung up or the socket closed),
  "error" (the server failed it). vLLM names its ends the same, less force_stop.
- `vllm:e2e_request_latency_seconds`: a completed request's start to its last audio (a cancelled
  one has no last audio).
Ours, where vLLM has no audio counterpart:
- `gepard:requests_total{outcome}`: every speech request by outcome: completed, refused (a 4xx
  before it ran: a bad field, an unknown voice, bad reference audio), cancelled, failed. A
  WebSocket unit counts as one request, as it is one REST request inside.
- `gepard:time_to_first_audio_seconds`: start to the first audio chunk ready (vLLM's
  time-to-first-token, for audio).
- `gepard:real_time_factor`: a completed request's wall time over its speech (below 1: faster
  than real time; streaming/chunks.py's `rtf`).

No global state: several servers in one process (the tests) each count their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

if TYPE_CHECKING:
    from gepard_demo.batching.scheduler import BatchScheduler
    from gepard_demo.streaming.session import SynthesisSession

# How an utterance ended (SynthesisStats.outcome) -> vLLM's finished_reason.
FINISHED_REASONS = {"stop": "stop", "budget": "length", "force_stop": "force_stop"}
ABORT, ERROR = "abort", "error"
OUTCOMES = ("completed", "refused", "cancelled", "failed")
MEDIA_TYPE = CONTENT_TYPE_LATEST
# Seconds: a first chunk on a GPU is tens of ms, a cold CPU one several seconds.
_TTFA_BUCKETS = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)
_LATENCY_BUCKETS = (0.1, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
_RTF_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0)


class ServerMetrics:
    """One server's counters; `refused` and `ended` are called by its routes, `render` by /metrics."""

    def __init__(self, scheduler: BatchScheduler, model_name: str):
        self.registry = CollectorRegistry(auto_describe=True)
        r, label = self.registry, {"model_name": model_name}
        Gauge("vllm:num_requests_running", "Requests in the running batch.", ["model_name"],
              registry=r).labels(**label).set_function(lambda: scheduler.load()["running"])
        Gauge("vllm:num_requests_waiting", "Requests waiting in the queue.", ["model_name"],
              registry=r).labels(**label).set_function(lambda: scheduler.load()["waiting"])
        success = Counter("vllm:request_success", "Count of requests that ended, by how they ended.",
                          ["model_name", "finished_reason"], registry=r)
        self._success = {reason: success.labels(model_name=model_name, finished_reason=reason)
                         for reason in (*FINISHED_REASONS.values(), ABORT, ERROR)}
        outcomes = Counter("gepard:requests", "Speech requests by outcome.", ["model_name", "outcome"], registry=r)
        self._outcomes = {o: outcomes.labels(model_name=model_name, outcome=o) for o in OUTCOMES}
        self._ttfa = Histogram("gepard:time_to_first_audio_seconds", "Request start to its first audio chunk.",
                               ["model_name"], buckets=_TTFA_BUCKETS, registry=r).labels(**label)
        self._latency = Histogram("vllm:e2e_request_latency_seconds", "A completed request's start to its last audio.",
                                  ["model_name"], buckets=_LATENCY_BUCKETS, registry=r).labels(**label)
        self._rtf = Histogram("gepard:real_time_factor", "A completed request's wall time over its speech.",
                              ["model_name"], buckets=_RTF_BUCKETS, registry=r).labels(**label)

    def refused(self) -> None:
        """A request refused before it ran (a 4xx)."""
        self._outcomes["refused"].inc()

    def ended(self, session: SynthesisSession, failed: bool = False) -> None:
        """A session that was started has ended: completed, cancelled (hung up) or failed."""
        st = session.stats
        if failed:
            outcome, reason = "failed", ERROR
        elif st.complete and st.outcome in FINISHED_REASONS:  # closing a session cancels it: ask what it did first
            outcome, reason = "completed", FINISHED_REASONS[st.outcome]
        else:
            outcome, reason = "cancelled", ABORT
        self._outcomes[outcome].inc()
        self._success[reason].inc()
        if st.ttfa_s is not None:
            self._ttfa.observe(st.ttfa_s)
        if outcome == "completed":
            self._latency.observe(st.wall_s)
            if st.rtf is not None:
                self._rtf.observe(st.rtf)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
