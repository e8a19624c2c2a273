"""The banner at the top of the page: which model runs, and whether it can speak.

Compact: one line, with the details (why the real model did not load, how to fix it, what
the random-weight defaults are) folded in a <details> that expands on a click."""

from __future__ import annotations

import html

from gepard_demo.ui.hosts.page_host import PageHost

# On random weights the page's defaults keep the noise short and quiet (see server.build_app).
RANDOM_WEIGHTS_MAX_FRAMES = 64  # about 3 s per text segment
RANDOM_WEIGHTS_GAIN = 0.3  # the live player's volume


def banner_markdown(host: PageHost) -> str:
    own = host.banner_markdown()  # a served model (ui/hosts/served.py) says what the server fixes
    if own is not None:
        return own
    info = host.info
    name = html.escape(str(info.name))
    where = f"`{html.escape(str(info.path))}`"
    rev = f", revision `{html.escape(str(info.revision))}`" if info.revision else ""
    if info.random_weights:
        line = f"⚠️ **Running `{name}`, a model with random weights: it makes noise, not speech.**"
    else:
        line = f"**Model:** `{name}`{rev} ({info.device}, {info.dtype})."
    if info.speed:
        line += f" **Speed path:** {html.escape(str(info.speed))}."
    for notice in host.notices:
        line += f"\n\n{notice}"
    details = []
    if info.random_weights:
        details.append(
            "Everything else (streaming, controls, stats) works as with the real model. "
            "A cloned voice is noise too: the voice compressor's weights are random as well. To keep the noise "
            f"short and quiet, the defaults here are {RANDOM_WEIGHTS_MAX_FRAMES} frames (about "
            f"{RANDOM_WEIGHTS_MAX_FRAMES / 21.5:.0f} s) per text segment and the live player at "
            f"{RANDOM_WEIGHTS_GAIN:.0%} volume."
        )
    else:
        details.append(f"Loaded from {where}.")
    if host.fallback_reason:
        reason = html.escape(host.fallback_reason)
        kind = html.escape(host.fallback_reason.split(":", 1)[0])
        requested = html.escape(host.requested)
        line += f" The requested model `{requested}` did not load ({kind})."
        details.append(
            f"No weights on this machine? **To fix:** on a machine with internet run `hf download nineninesix/gepard-1.0 "
            f"--local-dir DIR`, copy DIR here, and start the app with `GEPARD_MODEL=DIR python app.py` "
            f"(or `python app.py --model DIR`).\n\nFull error: {reason}"
        )
    body = "\n\n".join(details)
    return f"{line}\n\n<details><summary>More</summary>\n\n{body}\n\n</details>"
