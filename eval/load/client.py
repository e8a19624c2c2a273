"""One load request as the bench sends it, and the check made before a run.

A request is `POST /v1/audio/speech` with `stream=true`, `stream_format=audio`,
`response_format=pcm` (the wheel's `async_request_openai_audio_speech`): raw s16le bytes as the
server makes them. Each non-empty read of the response is one chunk, timed when it arrives
(the bench's aiohttp `iter_any`; httpx's `aiter_raw` here, so no decoding layer regroups the
bytes).

Before a run, `check_server` asks each server what it is (`GET /v1/models`) and sends the run's
body once, unstreamed as WAV and cut to a few frames: a URL that is not a speech server, a body
the server refuses and the sample rate (the WAV header's) are known before the first measured
request. vLLM-Omni drops fields it does not know unread, so our extension fields in
--extra-body go only to servers whose /v1/models entry says they take them (as eval's served
engine does); anything else it drops cannot be seen from outside.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass

import soundfile as sf

from eval.load.metrics import RequestRow
from gepard_demo.serving.client import ServedFeatures, no_extension_reason
from gepard_demo.serving.protocol import MODELS_PATH, SPEECH_PATH
from gepard_demo.settings import EXTENSION_GROUPS

RATE_HEADER = "X-Gepard-Sample-Rate"  # our server says the rate of its PCM; vLLM-Omni does not
CHECK_FRAMES = 8  # the check request's budget: enough for a WAV header and a few samples


class LoadError(Exception):
    """A load run that cannot start or measure: the server, a setting or the gate named."""


@dataclass(frozen=True)
class Server:
    """A server as the check found it."""

    url: str
    model: str
    sample_rate: int
    features: ServedFeatures


def stream_body(text: str, model: str, extra_body: dict) -> dict:
    """The bench's body: the model, the text, streamed raw PCM; --extra-body over it."""
    return {"model": model, "input": text, **extra_body, "stream": True, "stream_format": "audio",
            "response_format": "pcm"}


def _reason(response) -> str:
    """The server's own words for a refusal (vLLM-Omni and ours: {"error": {"message": ...}})."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    err = body.get("error") if isinstance(body, dict) else None
    if isinstance(err, dict) and err.get("message"):
        return str(err["message"])
    return str(body.get("detail") or body)[:300] if isinstance(body, dict) else str(body)[:300]


async def check_server(client, url: str, text: str, extra_body: dict) -> Server:
    """What the server at `url` is and whether it takes the run's body (raises LoadError)."""
    import httpx

    try:
        r = await client.get(url + MODELS_PATH)
    except httpx.HTTPError as e:
        raise LoadError(f"no speech server at {url}: GET {MODELS_PATH} failed ({type(e).__name__}: {e})") from None
    try:
        entry = (r.json().get("data") or [{}])[0] if r.status_code == 200 else None
    except (ValueError, AttributeError):
        entry = None
    if not entry or "id" not in entry:
        raise LoadError(f"{url} is not a speech server: GET {MODELS_PATH} answered {r.status_code} "
                        f"without a model list ({r.text[:120]!r})")
    features = ServedFeatures.of(entry)
    for group, fields in EXTENSION_GROUPS.items():
        sent = sorted(set(fields) & set(extra_body))
        if sent and not features.takes(group):
            raise LoadError(f"--extra-body {sent[0]}: the server at {url} {no_extension_reason(group)}; "
                            "it would be dropped unread, so the run is refused before it starts")
    body = {**stream_body(text, entry["id"], extra_body), "stream": False, "response_format": "wav",
            "max_new_tokens": CHECK_FRAMES}
    body.pop("stream_format")
    try:
        r = await client.post(url + SPEECH_PATH, json=body)
    except httpx.HTTPError as e:
        raise LoadError(f"speech server at {url}: POST {SPEECH_PATH} failed ({type(e).__name__}: {e})") from None
    if r.status_code == 404:
        raise LoadError(f"{url} is not a speech server: POST {SPEECH_PATH} answered 404")
    if r.status_code != 200:
        raise LoadError(f"the speech server at {url} refuses the run's request (HTTP {r.status_code}): {_reason(r)}")
    try:
        rate = sf.info(io.BytesIO(r.content)).samplerate
    except (sf.LibsndfileError, RuntimeError, TypeError) as e:
        raise LoadError(f"{url} is not a speech server: its answer to a WAV request is not WAV ({e})") from None
    return Server(url, entry["id"], int(rate), features)


async def send(client, server: Server, body: dict, row: RequestRow, t_run: float) -> RequestRow:
    """One streamed request, timed as the bench times it; a failure is the row's `error`."""
    import httpx

    st = time.perf_counter()
    row.start_time = st - t_run
    try:
        async with client.stream("POST", server.url + SPEECH_PATH, json=body) as r:
            row.status = r.status_code
            if r.status_code != 200:
                await r.aread()
                row.error = f"HTTP {r.status_code}: {_reason(r)}"
                return row
            rate = int(r.headers.get(RATE_HEADER) or server.sample_rate)
            async for chunk in r.aiter_raw():
                if chunk:
                    row.chunk_arrivals.append(time.perf_counter() - st)
                    row.chunk_bytes.append(len(chunk))
            return row.finish(time.perf_counter() - st, rate)
    except httpx.TimeoutException as e:
        row.error = f"timeout: {type(e).__name__}"
    except httpx.HTTPError as e:
        row.error = f"{type(e).__name__}: {e}"
    return row
