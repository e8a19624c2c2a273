"""The speech client (eval's served engine, the app's served mode) against what vLLM-Omni sends:
its SSE events exactly as serving_speech.py writes them (`event:` lines, compact JSON,
`response_format`, `usage` on done, no `gepard` extension), cut at arbitrary network
boundaries, and its `speech.audio.error` event. The page's session infers frames and the stop
from the audio length when the server does not say them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from gepard_demo.serving.client import SpeechClient, SpeechServerError
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.ui.hosts.served import ServedSession

PCM = (np.arange(-2500, 2500, dtype="<i2") * 13).tobytes()  # 5000 samples: under 5 frames


def _vllm_sse(pcm: bytes, pieces: int, error: bool = False) -> bytes:
    out = []
    for chunk in np.array_split(np.frombuffer(pcm, "<i2"), pieces):
        payload = {"type": "speech.audio.delta", "audio": base64.b64encode(chunk.tobytes()).decode(), "response_format": "pcm"}
        out.append(f"event: speech.audio.delta\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n")
    if error:
        err = {"type": "speech.audio.error", "error": {"message": "engine died", "type": "server_error", "param": None,
                                                        "code": 500, "partial_audio": True, "action": "discard"}}
        out.append(f"event: speech.audio.error\ndata: {json.dumps(err, separators=(',', ':'))}\n\n")
    else:
        done = {"type": "speech.audio.done", "usage": {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10}}
        out.append(f"event: speech.audio.done\ndata: {json.dumps(done, separators=(',', ':'))}\n\n")
    return "".join(out).encode()


def _client(body: bytes, seen: list) -> SpeechClient:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        cuts = [0, 7, 8, 61, 62, 500, len(body)]  # inside lines, inside base64, inside JSON
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=iter([body[a:b] for a, b in zip(cuts, cuts[1:])]))

    return SpeechClient("http://vllm.test:8091", transport=httpx.MockTransport(handler))


def test_vllm_sse_is_read_whatever_the_network_cuts():
    seen: list = []
    done: dict = {}
    parts = list(_client(_vllm_sse(PCM, 3), seen).stream("Hi.", seed=3, max_new_tokens=9, mode="sse", done=done))
    assert b"".join(p.tobytes() for p in parts) == PCM
    assert seen == [{"input": "Hi.", "voice": "default", "response_format": "pcm", "stream": True,
                     "stream_format": "sse", "max_new_tokens": 9, "seed": 3}]
    assert done["usage"]["output_tokens"] == 5


def test_an_error_event_ends_the_stream_loudly():
    with pytest.raises(SpeechServerError, match="engine died"):
        list(_client(_vllm_sse(PCM, 2, error=True), []).stream("Hi.", mode="sse"))


def test_the_page_session_infers_frames_and_stop_from_vllm_audio():
    session = ServedSession(
        _client(_vllm_sse(PCM, 3), []), SessionRequest("Hi.", SamplingSettings(max_frames=9, seed=4), StreamSettings())
    )
    audio = session.run()
    st = session.stats
    assert np.array_equal((audio * 32768).astype("<i2"), np.frombuffer(PCM, "<i2"))
    assert st.frames == 5 and st.stop_fired and not st.runaway and st.stop_frame == 5 and st.seed == 4
    assert st.chunks == 3 and st.ttfa_s is not None and st.audio_s == 5000 / 22050 and st.complete
    budget = ServedSession(
        _client(_vllm_sse(PCM, 3), []), SessionRequest("Hi.", SamplingSettings(max_frames=5, seed=4), StreamSettings())
    )
    budget.run()
    assert budget.stats.runaway and not budget.stats.stop_fired


def test_thin_clients_load_no_model_library():
    """The served paths (app --server-url, eval --engine server) and the text rules they share
    import neither torch nor transformers: a front end for a GPU deployment starts in a second
    instead of paying ~8 s for a library it never uses."""
    import subprocess
    import sys

    code = ("import sys, gepard_demo.ui.hosts.served, eval.engines.served, gepard_demo.streaming.text_input; "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
