"""Who may call the speech server: vLLM's API-key check and CORS (ServerSettings, host_settings.py).

The key check is vLLM's AuthenticationMiddleware, rule for rule (vllm/entrypoints/openai/
server_utils.py): a pure ASGI middleware, so the speech WebSocket's handshake is checked as an
HTTP request is; only paths under /v1 are checked (/health, /metrics and /version stay open for
probes and scrapers), OPTIONS never (a CORS preflight carries no credentials); the bearer token is
compared as SHA-256 digests in constant time; a refusal is 401 {"error": "Unauthorized"} (on a
WebSocket, Starlette sends it as the handshake's HTTP denial).
"""

from __future__ import annotations

import hashlib
import secrets

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.datastructures import URL, Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from gepard_demo.host_settings import ServerSettings

GUARDED_PREFIX = "/v1"  # vLLM's: every OpenAI route, ours included


class ApiKeyCheck:
    """vLLM's bearer check on every /v1 request and WebSocket (see the module's docstring)."""

    def __init__(self, app: ASGIApp, tokens: tuple[str, ...]) -> None:
        self.app = app
        self.digests = [hashlib.sha256(t.encode("utf-8")).digest() for t in tokens]

    def allowed(self, headers: Headers) -> bool:
        scheme, _, token = (headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        match = False
        for known in self.digests:  # every key compared, so the time says nothing about which
            match |= secrets.compare_digest(digest, known)
        return match

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return await self.app(scope, receive, send)
        path = URL(scope=scope).path.removeprefix(scope.get("root_path", ""))
        if path.startswith(GUARDED_PREFIX) and not self.allowed(Headers(scope=scope)):
            return await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)
        return await self.app(scope, receive, send)


def add_access(app: FastAPI, settings: ServerSettings) -> None:
    """CORS and the key check. CORS is the outer one, so a 401 carries the CORS headers a browser
    needs to read it (vLLM adds the key check outside CORS: a browser sees its 401 as a CORS
    failure); a preflight (OPTIONS) passes the key check in both."""
    if settings.api_key:
        app.add_middleware(ApiKeyCheck, tokens=(settings.api_key,))
    app.add_middleware(CORSMiddleware, allow_origins=list(settings.allowed_origins),
                       allow_credentials=settings.allow_credentials, allow_methods=list(settings.allowed_methods),
                       allow_headers=list(settings.allowed_headers))
