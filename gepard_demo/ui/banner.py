"""The banner at the top of the page: which model runs, and whether it can speak."""

from __future__ import annotations

import html

from .model_host import ModelHost


def banner_markdown(host: ModelHost) -> str:
    if hasattr(host, "banner_markdown"):  # a served model (ui/served.py) says what the server fixes
        return host.banner_markdown()
    info = host.info
    name = html.escape(str(info.name))
    where = f"`{html.escape(str(info.path))}`"
    rev = f", revision `{html.escape(str(info.revision))}`" if getattr(info, "revision", None) else ""
    lines = []
    if info.random_weights:
        lines.append(
            f"⚠️ **Running `{name}`, a model with random weights: it makes noise, not speech.** "
            f"Everything else (streaming, controls, stats) works as with the real model. "
            f"A cloned voice is noise too: the voice compressor's weights are random as well."
        )
    else:
        lines.append(f"**Model:** `{name}`{rev}, loaded from {where} ({info.device}, {info.dtype}).")
    if getattr(info, "speed", None):
        lines.append(f"**Speed path:** {html.escape(str(info.speed))}.")
    if host.fallback_reason:
        reason = html.escape(host.fallback_reason)
        kind = html.escape(host.fallback_reason.split(":", 1)[0])
        requested = html.escape(host.requested)
        lines.append(
            f"The requested model `{requested}` did not load ({kind}; no weights on this machine?). "
            f"**To fix:** on a machine with internet run `hf download nineninesix/gepard-1.0 "
            f"--local-dir DIR`, copy DIR here, and start the app with `GEPARD_MODEL=DIR python app.py` "
            f"(or `python app.py --model DIR`).\n\n"
            f"<details><summary>Full error</summary>\n\n{reason}\n\n</details>"
        )
    return "\n\n".join(lines)
