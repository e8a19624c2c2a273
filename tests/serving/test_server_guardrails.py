"""The speech server's guardrail extension fields (repetition_penalty, repetition_window,
force_stop_frames) and what it reports back: how each utterance ended and the onset-entropy
probe, on a whole response's headers and in the SSE done event, equal to what a local session
with the same settings makes; listed in /v1/models; bad values a 400 naming the field; and the
fields pass vLLM-Omni's own request model unread (so clients send them only where listed)."""

from __future__ import annotations

import json

import httpx
import pytest
from tests.support import vllm_omni_reference as vllm
from tests.support.app_fixtures import serve_in_thread, tiny_codec  # noqa: F401  (fixture)

from gepard_demo.serving.protocol import pcm16
from gepard_demo.settings import StreamSettings
from gepard_demo.streaming.session import SynthesisSession
from gepard_demo.streaming.seams import SessionRequest

TEXT = "Guard this sentence."
FRAMES = 40
STREAM = StreamSettings(first_chunk_frames=4, chunk_frames=8)


@pytest.fixture(scope="module")
def server(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    app = build_speech_app(tiny_engine, tiny_codec, tiny_engine.default_sampling().replace(stop_threshold=0.99),
                           STREAM)
    with serve_in_thread(app, "speech-server-guardrails") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            yield client


def _body(**fields):
    return {"input": TEXT, "max_new_tokens": FRAMES, "seed": 5, "response_format": "pcm", **fields}


def _local(engine, codec, **fields):
    s = engine.default_sampling().replace(stop_threshold=0.99, seed=5, max_frames=FRAMES, **fields)
    session = SynthesisSession(engine, codec, SessionRequest(TEXT, s, STREAM))
    return session.run(), session.stats


def test_models_lists_the_guardrails_and_the_probe(server):
    entry = server.get("/v1/models").json()["data"][0]
    assert entry["guardrails"] is True and entry["probe"] is True
    assert {"repetition_penalty", "repetition_window", "force_stop_frames", "cfg_scale"} <= set(entry["extension_fields"])


def test_a_whole_response_is_the_local_sessions_and_says_how_it_ended(server, tiny_engine, tiny_codec):  # noqa: F811
    fields = {"repetition_penalty": 1.3, "repetition_window": 8, "force_stop_frames": 23}
    r = server.post("/v1/audio/speech", json=_body(**fields))
    assert r.status_code == 200, r.text
    audio, stats = _local(tiny_engine, tiny_codec, **fields)
    assert r.content == pcm16(audio)
    assert stats.force_stopped and stats.frames == 23
    h = r.headers
    assert (h["x-gepard-frames"], h["x-gepard-ended-by"], h["x-gepard-force-stopped"], h["x-gepard-runaway"]) == \
        ("23", "force_stop", "true", "true")
    probe = stats.probe()
    assert float(h["x-gepard-entropy-onset"]) == pytest.approx(probe["entropy_onset"], abs=1e-4)
    assert h["x-gepard-entropy-settled"] == ""  # 23 frames: frames 40-59 are not there
    plain = server.post("/v1/audio/speech", json=_body())
    assert plain.headers["x-gepard-ended-by"] == "budget" and plain.content != r.content


def test_the_sse_done_event_carries_the_probe_traces(server, tiny_engine, tiny_codec):  # noqa: F811
    fields = {"repetition_penalty": 1.2, "force_stop_frames": "auto"}
    body = _body(stream=True, stream_format="sse", max_new_tokens=200, **fields)
    with server.stream("POST", "/v1/audio/speech", json=body) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    done = events[-1]
    assert done["type"] == "speech.audio.done"
    g = done["gepard"]
    s = tiny_engine.default_sampling().replace(stop_threshold=0.99, seed=5, max_frames=200, **fields)
    session = SynthesisSession(tiny_engine, tiny_codec, SessionRequest(TEXT, s, STREAM))
    session.run()
    st = session.stats
    assert g["frames"] == st.frames and g["ended_by"] == "force_stop" and g["force_stopped"] is True
    assert st.frames == 163  # auto for three words: int(4 x (0.7 + 0.4 x 3) s x 21.53 frames/s)
    assert g["entropy"] == pytest.approx(st.entropy, abs=1e-4) and g["nll"] == pytest.approx(st.nll, abs=1e-4)
    assert len(g["entropy"]) == st.frames and len(g["nll"]) == st.frames
    assert g["entropy_drop"] == pytest.approx(st.probe()["entropy_drop"], abs=1e-4)


@pytest.mark.parametrize("fields, param, words", [
    ({"repetition_penalty": 0.9}, "repetition_penalty", "[1, 2]"),
    ({"repetition_penalty": 2.5}, "repetition_penalty", "[1, 2]"),
    ({"repetition_penalty": "1.2"}, "repetition_penalty", "number"),
    ({"repetition_window": -1}, "repetition_window", "[0,"),
    ({"repetition_window": 1.5}, "repetition_window", "integer"),
    ({"force_stop_frames": 0}, "force_stop_frames", "[1, max_frames"),
    ({"force_stop_frames": FRAMES + 1}, "force_stop_frames", f"max_frames = {FRAMES}"),
    ({"force_stop_frames": "soon"}, "force_stop_frames", "'auto'"),
    ({"force_stop_frames": "auto", "input": "🙂 🙂"}, "force_stop_frames", "has none"),
])
def test_bad_guardrail_fields_are_400_naming_the_field(server, fields, param, words):
    r = server.post("/v1/audio/speech", json=_body(**fields))
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == param and words in err["message"], err
    assert server.post("/v1/audio/speech", json=_body()).status_code == 200  # and it keeps serving


def test_guardrail_fields_would_pass_vllm_omni_unread():
    """vLLM-Omni's request model takes a body with our guardrail fields and drops them, so its
    audio would silently be unguarded: clients send them only to a server that lists them."""
    from gepard_demo.serving.client import guardrail_fields, request_body
    from gepard_demo.settings import SamplingSettings
    from gepard_demo.serving.cloning import split_extensions

    assert request_body(TEXT, guidance=guardrail_fields(SamplingSettings())) == request_body(TEXT)  # off: nothing extra
    assert guardrail_fields(SamplingSettings(repetition_window=8)) == {}  # a window alone changes nothing
    fields = guardrail_fields(SamplingSettings(repetition_penalty=1.3, repetition_window=8, force_stop_frames="auto"))
    body = request_body(TEXT, seed=3, guidance=fields)
    assert vllm.decide(body, "tiny") == (True, "raw")
    parsed = vllm.request_model().model_validate(body).model_dump()
    assert not {"repetition_penalty", "repetition_window", "force_stop_frames"} & set(parsed)
    plain, extensions = split_extensions(body)
    assert extensions == {"repetition_penalty": 1.3, "repetition_window": 8, "force_stop_frames": "auto"}
    assert "repetition_penalty" not in plain
