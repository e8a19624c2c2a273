"""Assemble the ASGI app (PCM route + Gradio page) and serve it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import gradio as gr
from fastapi import FastAPI

from gepard_demo.alignment.settings import AlignmentSettings
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.host_settings import LOOPBACK_PROXIES, TrafficSettings

from .audio_route import make_audio_router
from .captions import CaptionDesk, load_in_background
from gepard_demo.ui.page.banner import RANDOM_WEIGHTS_GAIN, RANDOM_WEIGHTS_MAX_FRAMES
from gepard_demo.ui.jobs.controller import DemoController
from gepard_demo.ui.jobs.registry import JobRegistry
from gepard_demo.ui.jobs.wav_sink import owned_wav_dir
from gepard_demo.ui.page.layout import CSS, build_demo, page_head
from gepard_demo.ui.page.link_preview import LinkPreview, LinkPreviewMiddleware
from gepard_demo.ui.page.saved_voices import SavedVoiceSettings, VisitorVoices
from gepard_demo.ui.hosts.page_host import PageHost
from .words_route import make_words_router


@dataclass
class DemoApp:
    """Everything one running demo owns; created by app.py's main (or a test) and passed in."""

    host: PageHost
    registry: JobRegistry
    controller: DemoController
    blocks: gr.Blocks
    app: FastAPI


# Gradio caps its queue at one waiting event on a ZeroGPU Space when the size is left unset, so a
# second visitor arriving while another waits for a place was refused "Queue is full" (the suite's
# slowed run caught it). Here a visitor waits in line and the page says where (queue_line.py), on
# every host alike; the bound only keeps a flood's waiting events finite.
QUEUE_MAX_WAITING = 10_000


def build_app(
    host: PageHost,
    sampling: SamplingSettings | None = None,
    stream: StreamSettings | None = None,
    *,
    wav_dir: str | Path | None = None,
    eval_tab: Callable[..., None] | None = None,
    eval_tab_error: str | None = None,
    traffic: TrafficSettings | None = None,
    captions: AlignmentSettings | None = None,
    saved_voices: SavedVoiceSettings | None = None,
) -> DemoApp:
    """The page and its routes around `host`. eval_tab: a builder of the Eval tab, called as
    eval_tab(host, speak=SpeakLink) inside it (app.py passes eval.ui.tab.build_eval_tab: gepard_demo
    never imports eval; the SpeakLink is its way into the Speak tab), or eval_tab_error, why there is
    none; the page then says so instead of silently hiding the tab. traffic: how visitors share the
    page (app.py passes its flags'; unset: TrafficSettings.for_batch of the host's concurrency).
    captions: the aligner's settings for the words under the player (None: off; in front of a
    server, its own word_timestamps are used when it lists them: captions.py). saved_voices: where
    the voice picker keeps voices, and whether each visitor has their own (None: no picker; a host
    whose voices are made here or in its GPU calls, not a served one: ui/page/saved_voices.py)."""
    if sampling is None:
        sampling = host.default_sampling()
        if host.info.random_weights:  # noise: short by default (the banner says so)
            sampling = sampling.replace(max_frames=min(sampling.max_frames, RANDOM_WEIGHTS_MAX_FRAMES))
    gain = RANDOM_WEIGHTS_GAIN if host.info.random_weights else 1.0
    stream = stream or StreamSettings()
    registry = JobRegistry(traffic or TrafficSettings.for_batch(host.concurrency))
    max_chars = registry.traffic.max_text_chars
    wav_dir = Path(wav_dir) if wav_dir else owned_wav_dir()  # the stale ones of killed apps removed
    desk = caption_desk(host, captions)
    controller = DemoController(host, registry, wav_dir, captions=desk)
    shelf = None if saved_voices is None else VisitorVoices(saved_voices)
    blocks = build_demo(host, controller, sampling, stream, eval_tab, eval_tab_error, max_chars=max_chars,
                        saved_voices=shelf)
    blocks.queue(default_concurrency_limit=1, max_size=QUEUE_MAX_WAITING)
    api = FastAPI()
    # Our routes first: Gradio is mounted at "/" and would otherwise catch every path.
    api.include_router(make_audio_router(registry, host.sample_rate, controller.queue_status,
                                         controller.rate_hint))
    api.include_router(make_words_router(desk))
    api = gr.mount_gradio_app(
        api, blocks, path="/", head=page_head(host.sample_rate, gain, max_chars), css=CSS,
        allowed_paths=[str(wav_dir)], footer_links=["api", "gradio"],
    )
    api.add_middleware(LinkPreviewMiddleware, preview=link_preview(host))
    return DemoApp(host, registry, controller, blocks, api)


def caption_desk(host: PageHost, settings: AlignmentSettings | None) -> CaptionDesk:
    """Where the page's words come from: in front of a server, the server's word_timestamps (only
    when its /v1/models lists them: never asked for otherwise); else our aligner, on this CPU."""
    features = host.features
    if features is not None:  # a served host
        from gepard_demo.serving.client import SpeechServerError

        try:
            features.check_word_timestamps(str(host.url))  # refused here, before any request asks for it
        except SpeechServerError as exc:
            return CaptionDesk(off_reason=f"no captions: {exc}")
        return CaptionDesk(served=True)
    if settings is None:
        return CaptionDesk(off_reason="captions are off on this page (app.py --no-captions)")
    return load_in_background(settings)


def link_preview(host: PageHost) -> LinkPreview:
    """What a shared link to the page unfurls to."""
    return LinkPreview(
        title="Gepard-1.0 text to speech: streaming demo",
        description=("Type a sentence and hear Gepard-1.0 (nineninesix/gepard-1.0) speak it as it is generated: "
                     "streaming TTS in the browser with the stop head's probabilities, timing stats and an "
                     f"evaluation tab. Serving {host.info.name}"
                     + (" (random weights: noise, not speech)." if host.info.random_weights else ".")),
    )


def serve(app: FastAPI, host: str, port: int, blocks: gr.Blocks | None = None,
          trusted_proxies: str = LOOPBACK_PROXIES) -> None:
    """Run the app with uvicorn. blocks: the page's Blocks, told its server as gr.Blocks.launch
    would tell it (ZeroGPU's worker closes the server's sockets it inherits by that port).
    trusted_proxies: the peers whose X-Forwarded-For names the client (TrafficSettings), given to
    uvicorn here so it never falls back to its own environment variable."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           timeout_graceful_shutdown=2, proxy_headers=True,
                                           forwarded_allow_ips=trusted_proxies))
    if blocks is not None:
        blocks.server = server  # type: ignore[assignment]  # gradio's Server drops the signal handlers we keep
    server.run()
