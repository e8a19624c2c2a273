"""ZeroGPU's refusals as one line: each error as `spaces` 0.51 itself raises it (its own `error()`,
its own messages, HTML toasts included) becomes one plain line that says what to do; anything
else is left to the caller. The same refusals through the real runtime: tests/page/test_zerogpu_spaces.py."""

from __future__ import annotations

import pytest
from spaces.zero.client import html_string
from spaces.zero.gradio import error

from gepard_demo.ui.hosts.gpu_refusals import explain

PRO_LINK = '<a style="white-space: nowrap" href="https://huggingface.co/subscribe/pro?from=ZeroGPU">Subscribe to Pro</a>'
CASES = [
    (error("ZeroGPU quota exceeded", "You have exceeded your free ZeroGPU quota (17s requested vs. 5s left). "
                                     "Try again in 2:14:01. "), "Your ZeroGPU quota for today is used up (17 s asked, 5 s "
                                                                "left today)", "try again in 2:14:01."),
    (error("ZeroGPU quota exceeded", "Space app has reached its GPU limit. Try re-running outside of examples"),
     "No GPU for visitors who are not logged in", "Log in to Hugging Face"),
    (error("ZeroGPU illegal duration", "The requested GPU duration (300s) is larger than the maximum allowed"),
     "more GPU time than one ZeroGPU call may take", "shorten the text"),
    (error("ZeroGPU queue timeout", html_string(f"No GPU was available after 60s. {PRO_LINK} to get the highest "
                                                "priority in ZeroGPU queues.", "plain"), html=True),
     "No GPU was free within 60 s", "Try again in a minute"),
    (error("ZeroGPU client error", "No GPU was available"), "No GPU was available for this Space just now", "try again"),
    (error("ZeroGPU worker error", "PicklingError"), "could not cross to the page (PicklingError)", "report it"),
    (error("ZeroGPU worker error", "GPU task aborted"), "the GPU worker stopped before the end", "Try again"),
    (error("ZeroGPU pending credits exceeded", "You have too many ZeroGPU credits allocated to running tasks."),
     "Too many of your GPU calls are still running", "once they have ended"),
]


@pytest.mark.parametrize("exc,what,todo", CASES, ids=[c[1][:24] for c in CASES])
def test_each_refusal_is_one_plain_line_with_what_to_do(exc, what, todo):
    line = explain(exc)
    assert what in line and todo in line, line
    assert "<" not in line and "\n" not in line and "http" not in line, line


def test_other_errors_are_not_refusals():
    assert explain(RuntimeError("boom")) is None
    assert explain(error("Synthesis failed", "boom")) is None
