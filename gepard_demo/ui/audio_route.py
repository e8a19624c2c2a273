"""Same-origin HTTP routes for the browser player: raw PCM per job, and the worklet's JS.

`GET /gepard/pcm/{job_id}` streams float32 little-endian mono PCM at the codec's sample rate
as the session produces it (chunked transfer, no container, no re-encoding: facts §8 says
Gradio's own streaming audio goes through AAC/HLS and costs seconds). Float32 keeps the bytes
identical to the final WAV, so a test can compare the two exactly. The stream waits for the
Generate that claims its id, and ends when that job finishes or is cancelled;
`X-Gepard-Sample-Rate` names the rate; `X-Gepard-Speed` the audio seconds this host made per wall
second lately (the player's automatic start buffer). A bad id is 400, too many open streams 429, an id
whose audio is gone (dropped from memory, already sent, or its Generate refused: kept_jobs.py) 410
with the reason; each is one line in the log.

`GET /gepard/queue/{job_id}`: where a request that has not started stands (JSON, for the page's
wait line): position, an estimate in seconds and in words.

`GET /gepard/load`: what the job registry holds now (JSON: Generates running, finished jobs kept,
their bytes against the bound, those dropped unheard by cause), for an operator or a benchmark;
no ids, no addresses.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from gepard_demo.ui.jobs.registry import JobError, JobGone, JobRegistry, TooManyListeners, check_id

PCM_PREFIX = "/gepard/pcm/"
QUEUE_PREFIX = "/gepard/queue/"
LOAD_PATH = "/gepard/load"
WORKLET_PATH = "/gepard/pcm-worklet.js"
STATIC_DIR = Path(__file__).with_name("static")  # the browser's scripts, read from here into the page
_WORKLET_FILE = STATIC_DIR / "pcm_worklet.js"
log = logging.getLogger("gepard_demo.ui")


def client_of(request) -> str:
    """Who a request comes from, for the per-client limits: the address uvicorn reports. That is
    the socket's peer, unless the peer is a trusted proxy (TrafficSettings.trusted_proxies, which
    server.serve hands uvicorn as forwarded_allow_ips): then the first address in X-Forwarded-For,
    read from the right, that is not a trusted proxy itself. Behind a proxy not trusted, every
    visitor shares the proxy's address: the per-client limits then act as global ones."""
    client = request.client if request is not None else None  # None: a call from Python, not HTTP
    return client.host if client and client.host else "unknown"


def make_audio_router(registry: JobRegistry, sample_rate: int,
                      queue_status: Callable[[str], dict],
                      rate_hint: Callable[[], float | None] | None = None) -> APIRouter:
    router = APIRouter()
    worklet_js = _WORKLET_FILE.read_text(encoding="utf-8")

    @router.get(PCM_PREFIX + "{job_id}")
    async def pcm_stream(job_id: str, request: Request):
        client = client_of(request)
        try:
            registry.admit(job_id, client)
        except JobError as exc:
            code = 429 if isinstance(exc, TooManyListeners) else 410 if isinstance(exc, JobGone) else 400
            log.warning("refused audio stream from %s (HTTP %d): %s", client, code, exc)
            raise HTTPException(status_code=code, detail=str(exc)) from None
        headers = {
            "Cache-Control": "no-store",
            "X-Gepard-Sample-Rate": str(sample_rate),
            "X-Gepard-Format": "f32le",
            # Proxies (a Space sits behind one) must not hold the stream back to buffer it.
            "X-Accel-Buffering": "no",
        }
        rate = rate_hint() if rate_hint else None
        if rate:  # audio s per wall s measured here: the player's start buffer until it measures its own
            headers["X-Gepard-Speed"] = f"{rate:.3f}"

        return StreamingResponse(registry.listen(job_id, client), media_type="application/octet-stream",
                                 headers=headers)

    @router.get(QUEUE_PREFIX + "{job_id}")
    async def queue(job_id: str):
        try:
            check_id(job_id)
        except JobError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from None
        return JSONResponse(queue_status(job_id), headers={"Cache-Control": "no-store"})

    @router.get(LOAD_PATH)
    async def load():
        return JSONResponse(registry.load(), headers={"Cache-Control": "no-store"})

    @router.get(WORKLET_PATH)
    async def worklet():
        return Response(worklet_js, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    return router
