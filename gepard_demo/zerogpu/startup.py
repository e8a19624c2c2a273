"""ZeroGPU's start-up: is this a ZeroGPU Space, and its start-up report.

`import spaces` must come before anything initialises CUDA: on a ZeroGPU Space it patches torch
so that the main process sees a CUDA device (the model is placed there at start-up) without ever
initialising one. `zerogpu_space()` imports it, so app.py calls it before it imports torch.

ZeroGPU looks for `@spaces.GPU` functions, packs the weights placed on 'cuda' and reports the
Space ready from inside `gr.Blocks.launch`, which `spaces` patches for that (spaces 0.51:
`spaces/zero/__init__.py`, `gradio.one_launch(startup)`). This app serves the Gradio page
through its own uvicorn mount (beside the PCM route) and never calls launch, so without
`report_startup()` the scan would never run and the Space would stop at start-up with
"No @spaces.GPU function detected". It must run after every GPU function is wrapped
(runners.ZeroGpu) and the weights are placed.
"""

from __future__ import annotations


def zerogpu_space() -> bool:
    """True on a ZeroGPU Space, as the `spaces` package reads it (SPACES_ZERO_GPU); False where
    `spaces` is not installed.

    It also turns off `spaces`' Gradio auto-wrap (SPACES_GRADIO_AUTO_WRAP): that would run every
    event handler (Stop, the PCM route's helpers, the takes panel) as a GPU call of its own,
    asking the visitor's quota for a click that needs no GPU. This app wraps exactly the work
    that does (runners.ZeroGpu)."""
    try:
        import spaces  # (patches torch on ZeroGPU: before any CUDA use)
        from spaces.config import Config
    except ImportError:
        return False
    spaces.disable_gradio_auto_wrap()
    return bool(Config.zero_gpu)


def report_startup() -> None:
    """Run ZeroGPU's start-up (weights packed, GPU functions reported); see the module docstring."""
    import spaces.zero as zero

    startup = getattr(zero, "startup", None)
    if startup is None:
        raise RuntimeError(f"spaces {getattr(__import__('spaces'), '__version__', '?')} has no start-up hook "
                           "(spaces.zero.startup): this app needs spaces 0.51.x on ZeroGPU")
    startup()
