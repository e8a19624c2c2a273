"""Running: a session iterated on its own thread, as the page's job thread and the server's do."""

from __future__ import annotations

import threading

from gepard_demo.streaming.session import SynthesisSession


class Running:
    """A session iterated on its own thread, as the page's job thread and the server's do."""

    def __init__(self, session: SynthesisSession):
        self.session, self.chunks = session, 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for _ in self.session:
                self.chunks += 1
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            self.error = exc

    def ended(self) -> bool:
        return not self.thread.is_alive()
