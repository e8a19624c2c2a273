"""The speech server's operations routes, open to probes and scrapers (outside /v1, so no API key):

- `GET /health`: 200 {"status": "healthy"} while the engine serves; 503 {"status": "unhealthy"}
  once it is dead, as vLLM-Omni answers an EngineDeadError (its api_server.py `health`). Dead
  here: the BatchScheduler that owns the engine was closed, or its thread died (an exception
  outside a step, e.g. the device lost while making a batch): no request would be served again,
  so a load balancer should stop sending them. An engine that fails to load never serves:
  `serve` exits before it listens.
- `GET /metrics`: the Prometheus text (metrics.py).
- `GET /version`: vLLM answers {"version": <vLLM's version>}. We are no vLLM build, so ours is
  {"version": "gepard-demo", "protocol": "vllm-omni==0.30.0"}: the protocol we speak, which is
  what a client gating on the version cares about.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from gepard_demo.serving.operations.metrics import MEDIA_TYPE, ServerMetrics
from gepard_demo.serving.protocol import PROTOCOL

if TYPE_CHECKING:
    from gepard_demo.batching.scheduler import BatchScheduler

HEALTH_PATH, METRICS_PATH, VERSION_PATH = "/health", "/metrics", "/version"
VERSION = {"version": "gepard-demo", "protocol": PROTOCOL}


def operations_router(scheduler: BatchScheduler, metrics: ServerMetrics) -> APIRouter:
    router = APIRouter()

    @router.get(HEALTH_PATH)
    async def health() -> JSONResponse:
        if scheduler.alive():
            return JSONResponse({"status": "healthy"})
        return JSONResponse({"status": "unhealthy"}, status_code=503)

    @router.get(METRICS_PATH)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=MEDIA_TYPE)

    @router.get(VERSION_PATH)
    async def version() -> dict:
        return VERSION

    return router
