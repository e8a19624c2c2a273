"""Same-origin HTTP routes for the browser player: raw PCM per job, and the worklet's JS.

`GET /gepard/pcm/{job_id}` streams float32 little-endian mono PCM at the codec's sample rate
as the session produces it (chunked transfer, no container, no re-encoding: facts §8 says
Gradio's own streaming audio goes through AAC/HLS and costs seconds). Float32 keeps the bytes
identical to the final WAV, so a test can compare the two exactly. The stream ends when the
job finishes or is cancelled; `X-Gepard-Sample-Rate` names the rate.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response, StreamingResponse

from .jobs import JobError, JobRegistry

PCM_PREFIX = "/gepard/pcm/"
WORKLET_PATH = "/gepard/pcm-worklet.js"
_WORKLET_FILE = Path(__file__).with_name("pcm_worklet.js")


def make_audio_router(registry: JobRegistry, sample_rate: int) -> APIRouter:
    router = APIRouter()
    worklet_js = _WORKLET_FILE.read_text(encoding="utf-8")

    @router.get(PCM_PREFIX + "{job_id}")
    async def pcm_stream(job_id: str):
        try:
            job = registry.open(job_id)
        except JobError as exc:
            raise HTTPException(status_code=400 if "bad job id" in str(exc) else 429, detail=str(exc))
        headers = {
            "Cache-Control": "no-store",
            "X-Gepard-Sample-Rate": str(sample_rate),
            "X-Gepard-Format": "f32le",
            # Proxies (a Space sits behind one) must not hold the stream back to buffer it.
            "X-Accel-Buffering": "no",
        }

        async def body():
            async for data in job.iter_bytes():
                yield data
            # Only reached when the whole stream was sent: free the job's audio now rather
            # than at the registry's next sweep.
            registry.discard_if_done(job_id)

        return StreamingResponse(body(), media_type="application/octet-stream", headers=headers)

    @router.get(WORKLET_PATH)
    async def worklet():
        return Response(worklet_js, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    return router
