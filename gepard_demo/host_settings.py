"""How a host serves its callers, fixed when it starts (not per request): batching on one engine,
and the page's traffic among its visitors. Passed explicitly from the entry points, like settings.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .declare import setting
from .settings import SettingsError, check_field, is_whole


ADMISSION_RULES = ("realtime", "cap")
MAX_LOOK_AHEAD = 64  # segments requested ahead at once; their frames wait in memory (a few MB)
MAX_BATCH_LIMIT = 256  # eval's largest batch; the authors' interactive range per GPU is 64-128 streams


@dataclass(frozen=True)
class BatchingSettings:
    """How one engine serves several callers at once (gepard_demo/batching).

    max_batch: requests decoding together in the running batch (vLLM-Omni's Gepard deploy file:
        max_num_seqs 4); more wait in a queue, streams ahead of batch work.
    admission: "realtime" admits a newcomer only while every running stream stays at or above
        real time (from the measured step and codec times; on a GPU that is up to the cap);
        "cap" admits up to max_batch whatever it costs (batch evaluation, no listener).
    headroom: the share of a frame's real-time budget (1 / 21.5 s) a step may take under
        "realtime", leaving the rest for jitter.
    codec_batching: the streams' codec chunks that line up decode in one call, each stream with
        its own exact state (batching/codec_pool.py); off: every stream decodes alone.
    look_ahead: how many later segments of a long text are generated ahead of the one playing,
        as rows of the running batch (streaming/segments.py); 0: one segment after another.
    """

    max_batch: int = 4
    admission: str = "realtime"
    headroom: float = 0.85
    codec_batching: bool = True
    look_ahead: int = 8

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "BatchingSettings":
        check_field(1 <= self.max_batch <= MAX_BATCH_LIMIT, "max_batch", f"max_batch must be in [1, {MAX_BATCH_LIMIT}], got {self.max_batch}")
        check_field(self.admission in ADMISSION_RULES, "admission", f"admission must be one of {ADMISSION_RULES}, got {self.admission!r}")
        check_field(0.1 <= self.headroom <= 1.0, "headroom", f"headroom must be in [0.1, 1.0], got {self.headroom}")
        check_field(is_whole(self.look_ahead) and 0 <= self.look_ahead <= MAX_LOOK_AHEAD,
               "look_ahead", f"look_ahead must be in [0, {MAX_LOOK_AHEAD}] segments, got {self.look_ahead}")
        return self


LOOPBACK_PROXIES = "127.0.0.1,::1"  # uvicorn's own default: a proxy on this machine (nginx, a tunnel)
PRIVATE_PROXIES = "127.0.0.1,::1,10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7"  # a Space's proxies


@dataclass(frozen=True)
class TrafficSettings:
    """How the page shares itself among its visitors (gepard_demo/ui/jobs/registry.py, kept_jobs.py, server.py).

    per_client: one client's Generates running (or waiting for the engine) at once; one more is
        refused when it reaches the handler. A client is an address (see trusted_proxies).
    max_running: Generates running at once from everyone together (a backstop: Gradio's queue
        already runs at most --max-batch at once).
    keep_audio_bytes: the finished jobs' audio kept for a listener that comes late, all together
        (each job also counts KEPT_JOB_OVERHEAD); past it the oldest are dropped first.
    keep_s: at most this long after it finished is a job's audio kept.
    trusted_proxies: peers (addresses or networks, comma-separated) whose X-Forwarded-For names
        the client: uvicorn's forwarded_allow_ips. Any other peer is the client itself.
    keep_running_bytes: a running job keeps at most this much of the audio its listeners already
        have (ui/jobs/mailbox.py): 32 MB, about 6 minutes of float32 at 22.05 kHz.
    max_text_chars: the longest text a Generate takes: 2000 where visitors share the engine or a
        GPU quota (a public Space), a chapter (CHAPTER_CHARS) elsewhere; the page states it.
    max_ahead_s: how far a Generate's audio may run ahead of real time since its first chunk (the
        player plays in real time): beyond it the session waits, so a chapter on a fast GPU does
        not pile its whole audio up in the browser and the mailbox. 300 s: 26 MB as float32.
    """

    per_client: int = 2
    max_running: int = 64
    keep_audio_bytes: int = 64 * 2**20
    keep_s: float = 60.0
    trusted_proxies: str = LOOPBACK_PROXIES
    keep_running_bytes: int = 32 * 2**20
    max_text_chars: int = 2000
    max_ahead_s: float = 300.0

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "TrafficSettings":
        check_field(self.per_client >= 1, "per_client", f"per_client must be at least 1, got {self.per_client}")
        check_field(self.max_running >= self.per_client,
               "max_running", f"max_running must be at least per_client ({self.per_client}), got {self.max_running}")
        check_field(self.keep_audio_bytes >= 0, "keep_audio_bytes", f"keep_audio_bytes must be 0 or more, got {self.keep_audio_bytes}")
        check_field(self.keep_s >= 0, "keep_s", f"keep_s must be 0 or more, got {self.keep_s}")
        check_field(bool(self.trusted_proxies.strip()), "trusted_proxies", "trusted_proxies is empty (name at least one address, "
               "e.g. 127.0.0.1)")
        check_field(self.keep_running_bytes >= 0, "keep_running_bytes", f"keep_running_bytes must be 0 or more, got {self.keep_running_bytes}")
        check_field(1 <= self.max_text_chars <= 1_000_000, "max_text_chars", f"max_text_chars must be in [1, 1000000], got {self.max_text_chars}")
        check_field(self.max_ahead_s > 0, "max_ahead_s", f"max_ahead_s must be above 0, got {self.max_ahead_s}")
        return self

    @staticmethod
    def for_batch(max_batch: int, **changes) -> "TrafficSettings":
        """Half the places for one client (at least 1), so others keep the rest; the backstop
        never below the places themselves."""
        changes = {"per_client": max(1, max_batch // 2), **changes}
        changes.setdefault("max_running", max(TrafficSettings.max_running, max_batch, changes["per_client"]))
        return TrafficSettings(**changes)


def _json_list(text: str) -> tuple[str, ...]:
    """A CORS flag's value as vLLM reads it: a JSON list of strings ('["https://a.example"]')."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SettingsError(f"expected a JSON list of strings, e.g. '[\"https://example.com\"]', got {text!r}")
    return tuple(value)


def _json_write(value: tuple[str, ...]) -> str:
    return json.dumps(list(value))


@dataclass(frozen=True)
class ServerSettings:
    """Who may call the speech server and by what name (`serve`), as vLLM's own flags say it
    (vllm/entrypoints/openai/cli_args.py; serving/operations/access.py applies them). Each is one
    `setting(...)`: the flag, its help and docs/DEPLOY.md's table derive from it.

    served_model_name: the model id /v1/models lists and a request's `model` must name (vLLM's
        --served-model-name: then the checkpoint's path is refused, as vLLM refuses any other
        name); unset: the checkpoint as given (--model).
    api_key: every /v1 route (the WebSocket too) needs `Authorization: Bearer KEY`, else 401
        {"error": "Unauthorized"}; /health, /metrics and /version stay open, as in vLLM. Unset:
        $VLLM_API_KEY, read at the edge (__main__), else no check.
    allowed_origins / allowed_methods / allowed_headers / allow_credentials: the CORS answer
        (FastAPI's CORSMiddleware), vLLM's defaults: every origin, method and header, no credentials.
    """

    served_model_name: str | None = setting(
        None, kind=str | None, read=str, metavar="NAME",
        help="the model id /v1/models lists and requests name (vLLM's flag; default: the --model as given, "
             "a local folder's full path); with it, the path is refused as vLLM refuses any other name")
    api_key: str | None = setting(
        None, kind=str | None, read=str, metavar="KEY",
        help="require `Authorization: Bearer KEY` on every /v1 route, the WebSocket too (401 otherwise); "
             "/health, /metrics and /version stay open (vLLM's flag; default: $VLLM_API_KEY, else none)")
    allowed_origins: tuple = setting(("*",), kind=tuple, read=_json_list, write=_json_write, metavar="JSON",
                                     help='CORS allowed origins, a JSON list (vLLM\'s flag; default ["*"])')
    allowed_methods: tuple = setting(("*",), kind=tuple, read=_json_list, write=_json_write, metavar="JSON",
                                     help='CORS allowed methods, a JSON list (default ["*"])')
    allowed_headers: tuple = setting(("*",), kind=tuple, read=_json_list, write=_json_write, metavar="JSON",
                                     help='CORS allowed headers, a JSON list (default ["*"])')
    allow_credentials: bool = setting(False, kind=bool, read=bool, help="CORS: allow credentials (vLLM's flag)")

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "ServerSettings":
        check_field(self.served_model_name is None or bool(self.served_model_name.strip()), "served_model_name",
                    "served_model_name is empty: leave it out to serve the model under its --model")
        check_field(self.api_key is None or bool(self.api_key), "api_key", "api_key is empty: leave it out for no check")
        return self
