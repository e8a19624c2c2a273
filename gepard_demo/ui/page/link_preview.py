"""Link-preview tags (Open Graph / Twitter card) for the demo page.

Gradio's page template carries its own tags first (og:title "Gradio", a Gradio header image)
and then a second, empty set; link unfurlers read the first. This ASGI middleware rewrites
the page's HTML: every og:* / twitter:* meta tag is dropped and ours are put right after
<meta charset>. Only GET responses that are HTML pass through the rewrite; audio streams and
API calls are untouched (and never buffered).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_META_RE = re.compile(
    rb'<meta\s+(?:property="og:[^"]*"|name="twitter:[^"]*")\s+content="[^"]*"\s*/?>'
)
_CHARSET_RE = re.compile(rb'<meta charset="[^"]*"\s*/?>', re.I)


@dataclass(frozen=True)
class LinkPreview:
    title: str
    description: str
    image_url: str | None = None  # absolute URL of a preview image, if there is one

    def tags(self) -> bytes:
        t, d = html.escape(self.title, quote=True), html.escape(self.description, quote=True)
        tags = [
            f'<meta property="og:title" content="{t}" />',
            f'<meta property="og:description" content="{d}" />',
            '<meta property="og:type" content="website" />',
            f'<meta name="description" content="{d}" />',
            f'<meta name="twitter:card" content="{"summary_large_image" if self.image_url else "summary"}" />',
            f'<meta name="twitter:title" content="{t}" />',
            f'<meta name="twitter:description" content="{d}" />',
        ]
        if self.image_url:
            u = html.escape(self.image_url, quote=True)
            tags += [f'<meta property="og:image" content="{u}" />', f'<meta name="twitter:image" content="{u}" />']
        return ("\n\t\t" + "\n\t\t".join(tags)).encode()

    def rewrite(self, page: bytes) -> bytes:
        page = _META_RE.sub(b"", page)
        m = _CHARSET_RE.search(page)
        at = m.end() if m else 0
        return page[:at] + self.tags() + page[at:]


class LinkPreviewMiddleware:
    """Pure ASGI: buffers only text/html responses to GET, rewrites their head tags."""

    def __init__(self, app, preview: LinkPreview):
        self.app = app
        self.preview = preview

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":
            return await self.app(scope, receive, send)
        start: dict | None = None
        body: list[bytes] = []
        passthrough = False

        async def wrapped_send(message):
            nonlocal start, passthrough
            if message["type"] == "http.response.start":
                headers = dict((k.lower(), v) for k, v in message.get("headers", []))
                if b"text/html" in headers.get(b"content-type", b"") and b"content-encoding" not in headers:
                    start = message
                else:
                    passthrough = True
                    await send(message)
                return
            if passthrough or start is None or message["type"] != "http.response.body":
                return await send(message)
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            page = self.preview.rewrite(b"".join(body))
            headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(page)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, wrapped_send)
