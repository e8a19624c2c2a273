"""The speech server's bound on a request's body, as ASGI middleware: refused with 413 before
the route reads it, whether its length is declared (Content-Length) or not (chunked).

One limit for the app (MAX_BODY_BYTES: room for a base64 reference clip in a JSON body) and a
smaller one per route where the route's own bound is smaller (a voice upload: the wheel's 10 MB
file plus its form), so a body the route would refuse is never read whole first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi.responses import JSONResponse

from gepard_demo.serving.protocol import error_body

MAX_BODY_BYTES = 16 * 2**20  # room for a base64 reference clip; text alone is a few KB


class BodyTooLarge(Exception):
    """Raised from the body's receive channel once a chunked body passes its limit; a route that
    catches its parser's errors lets this one through, and the middleware answers 413."""


def too_large(limit: int) -> JSONResponse:
    return JSONResponse(error_body(f"request body over {limit} bytes", 413), status_code=413)


class BodyLimit:
    """ASGI middleware (module docstring). route_limits: {(method, path): bytes} below max_bytes."""

    def __init__(self, app: Any, max_bytes: int, route_limits: Mapping[tuple[str, str], int] | None = None):
        self.app = app
        self.max_bytes = max_bytes
        self.route_limits = dict(route_limits or {})

    def limit(self, scope: Mapping[str, Any]) -> int:
        return min(self.max_bytes, self.route_limits.get((scope.get("method", ""), scope.get("path", "")),
                                                         self.max_bytes))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit(scope)
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            return await too_large(limit)(scope, receive, send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except BodyTooLarge:
            await too_large(limit)(scope, receive, send)
