"""The engines eval can drive, one module each; `load_engine` picks one by name.

Its modules, each in a line: docs/DESIGN.md's tree.
"""

from __future__ import annotations

from eval.engines.base import EvalEngine

ENGINES = ("local", "local-stream", "server", "piper", "files")


def load_engine(name: str, model: str = "tiny", device: str = "cpu", cache_dir: str | None = None,
                server_urls: tuple[str, ...] = (), server_timeout: float = 60.0, concurrency: int = 1,
                log=print) -> EvalEngine:
    """The engine called `name` (one of ENGINES), loaded; its heavy imports happen here, not at import."""
    if name == "server":
        from eval.engines.served import ServerError, load_server_engine

        if not server_urls:
            raise ServerError("--engine server needs --server-url http://HOST:PORT")
        return load_server_engine(server_urls, model, server_timeout, concurrency, log=log)
    if name in ("local", "local-stream"):
        from eval.engines.local import GepardLocal, GepardStreaming

        cls = GepardLocal if name == "local" else GepardStreaming
        return cls.load(model, device=device, cache_dir=cache_dir)
    if name == "piper":
        from eval.engines.piper import PiperReference

        return PiperReference.load()
    if name == "files":
        from eval.engines.files import AudioFiles

        return AudioFiles(model)  # the run's model is the folder or manifest (--files)
    raise ValueError(f"unknown engine {name!r}: one of {ENGINES}")
