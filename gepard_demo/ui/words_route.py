"""`GET /gepard/words/{job_id}`: a Generate's words as the captions have them (JSON, for the
player's captions, captions.js); `.srt` / `.vtt` of the same words for download."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException
from fastapi.responses import JSONResponse, Response

from gepard_demo.alignment.subtitles import to_srt, to_vtt

from .captions import CaptionDesk

WORDS_PREFIX = "/gepard/words/"
SUBTITLES = {"srt": (to_srt, "application/x-subrip"), "vtt": (to_vtt, "text/vtt")}


def make_words_router(desk: CaptionDesk) -> APIRouter:
    router = APIRouter()

    @router.get(WORDS_PREFIX + "{name}")
    async def words(name: str):
        job_id, _, kind = name.partition(".")
        if not kind:
            return JSONResponse(desk.words(job_id), headers={"Cache-Control": "no-store"})
        if kind not in SUBTITLES:
            raise HTTPException(status_code=404, detail=f"no {kind!r} subtitles: srt or vtt")
        alignment = desk.alignment(job_id) if desk.words(job_id)["state"] in ("pending", "done") else None
        if alignment is None:
            raise HTTPException(status_code=404, detail=f"no words for job {job_id!r}")
        write, media = SUBTITLES[kind]
        return Response(write(alignment), media_type=media,
                        headers={"Content-Disposition": f'attachment; filename="gepard-{job_id}.{kind}"',
                                 "Cache-Control": "no-store"})

    return router
