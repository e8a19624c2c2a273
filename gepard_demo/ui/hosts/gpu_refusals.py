"""ZeroGPU's refusals and failures as one line a visitor can act on.

`spaces` (0.51, spaces/zero/client.py and wrappers.py) raises a gr.Error titled by what happened,
with a message meant for its own toast: raw HTML links for some, a Python class name for worker
errors. `explain(exc)` turns each into one plain line that says what happened and what to do: log
in for a bigger quota, a shorter text, the wait ZeroGPU gives. Anything else: None (the caller
shows the fault as it is).
"""

from __future__ import annotations

import html
import re

LOG_IN = "log in to Hugging Face for more (a free account has 3.5 min of GPU a day, PRO 25 min or more)"


def _plain(text: str) -> str:
    """The message without its HTML (spaces' toasts carry <a> links) or its Markdown links."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", re.sub(r"<[^>]+>", "", str(text)))
    return " ".join(html.unescape(text).split())


def _wait(message: str) -> str:
    found = re.search(r"Try again in (\d[\d:]*(?:\.\d+)?)", message)
    return f"; ZeroGPU says try again in {found.group(1)}" if found else ""


def explain(exc: BaseException) -> str | None:
    """One line for a ZeroGPU refusal or failure (`exc` as spaces raised it), else None."""
    title = str(getattr(exc, "title", "") or "")
    if not title.startswith("ZeroGPU"):
        return None
    message = _plain(getattr(exc, "message", None) or str(exc))
    asked = re.search(r"\((\d+)s requested vs\. (\d+)s left\)", message)
    if title == "ZeroGPU quota exceeded":
        if "reached its GPU limit" in message or "No GPU was available" in message:
            return ("No GPU for visitors who are not logged in right now: this Space's shared GPU quota is used "
                    f"up. {LOG_IN[0].upper()}{LOG_IN[1:]}, or try again later.")
        left = f" ({asked.group(1)} s asked, {asked.group(2)} s left today)" if asked else ""
        return (f"Your ZeroGPU quota for today is used up{left}: try a shorter text (it asks for less), "
                f"{LOG_IN}, or wait{_wait(message)}.")
    if title == "ZeroGPU illegal duration":
        return ("This request asks for more GPU time than one ZeroGPU call may take: shorten the text or lower "
                "max frames.")
    if title == "ZeroGPU queue timeout":
        return ("No GPU was free within 60 s: the Space is busy. Try again in a minute (logged-in visitors are "
                "served first).")
    if title == "ZeroGPU pending credits exceeded":
        return "Too many of your GPU calls are still running: try again once they have ended."
    if title == "ZeroGPU client error":
        if "No GPU was available" in message:
            return "No GPU was available for this Space just now: try again in a minute."
        return f"ZeroGPU refused the call ({message}): reload the page and try again."
    if title == "ZeroGPU worker error":
        why = ("what the GPU sent back could not cross to the page (PicklingError)" if "Pickl" in message else
               "the GPU worker stopped before the end" if "aborted" in message else f"the GPU worker failed ({message})")
        return f"The GPU call failed: {why}. Try again; if it happens again, please report it."
    return f"{title}: {message}"
