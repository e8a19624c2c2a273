"""Our speech server decides every request as vLLM-Omni 0.30 serving Gepard does.

The reference is vLLM-Omni's own code from the installed wheel (tests/support/vllm_omni_reference.py):
its pydantic request model and its Gepard adapter's `validate`. For each request of the corpus,
our accept/reject decision and stream mode (none / raw / sse) must equal it, both from
`protocol.parse_speech_request` and over HTTP from a running server. Cases where we differ on
purpose carry a DIFF mark with the reason; docs/DEPLOY.md (§2) lists the same ones.

Cloning cases are marked CLONE: today both refuse them (vLLM-Omni's Gepard adapter is zero-shot
only). When our server accepts `ref_audio` / `ref_text` (voice cloning), flip only those:
mark them DIFF_CLONE, and nothing else in the corpus changes.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from tests.support import vllm_omni_reference as vllm
from tests.support.app_fixtures import free_port, serve_in_thread, tiny_codec, wait_for_port  # noqa: F401  (tiny_codec: fixture)

from gepard_demo.serving.protocol import (
    CLONING_FIELDS,
    GEPARD_RULES,
    UNSUPPORTED_FIELDS,
    RequestError,
    parse_speech_request,
)
from gepard_demo.settings import StreamSettings

MODEL = "tiny"
T = "Hello there."
CLONE = "clone"  # a voice-cloning field: a deliberate-difference candidate (see the docstring)
# Deliberate differences: (what we decide, why). docs/DEPLOY.md lists them.
DIFF_UNKNOWN = ("reject", "unknown fields are refused; vLLM-Omni drops them silently")
DIFF_TEXT = ("reject", "text with nothing speakable, or over 2000 characters, is refused up front")

# (body, mark): mark None = must equal vLLM-Omni; CLONE = must equal it today; DIFF_* = ours differs.
CORPUS = [
    # plain requests and the defaults
    ({"input": T}, None),
    ({"input": T, "response_format": "pcm"}, None),
    ({"input": T, "response_format": "flac"}, None),
    ({"input": T, "response_format": "mp3"}, None),
    ({"input": T, "response_format": "opus"}, None),
    ({"input": T, "response_format": "aac"}, None),
    ({"input": T, "model": MODEL, "voice": "default"}, None),
    ({"input": T, "model": "someone/else"}, None),
    ({"input": T, "model": ""}, None),  # vLLM serves an empty model name as its own
    ({"input": T, "model": None}, None),
    ({"input": T, "voice": "DEFAULT"}, None),
    ({"input": T, "voice": None}, None),
    ({"input": T, "speaker": "default"}, None),
    ({"input": T, "voice": {"id": "default"}}, None),
    ({"input": T, "voice": {"name": "default"}}, None),
    ({"input": T, "voice": "alloy"}, None),
    ({"input": T, "voice": ""}, None),
    ({}, None),
    ({"input": None}, None),
    ({"input": 5}, None),
    ({"input": ""}, None),
    ({"input": "   \n"}, None),
    # every streaming combination
    *[({"input": T, "response_format": fmt, **s}, None)
      for fmt in ("wav", "pcm", "flac", "mp3", "opus")
      for s in ({"stream": True}, {"stream": False}, {"stream_format": "sse"}, {"stream_format": "audio"},
                {"stream": True, "stream_format": "sse"}, {"stream": True, "stream_format": "audio"},
                {"stream": False, "stream_format": "sse"}, {"stream": False, "stream_format": "audio"},
                {"stream": True, "stream_format": None})],
    ({"input": T, "stream": True}, None),  # default wav
    ({"input": T, "stream_format": "chunks"}, None),
    ({"input": T, "response_format": "pcm", "stream": "true"}, None),
    ({"input": T, "response_format": "pcm", "stream": "yes"}, None),
    ({"input": T, "response_format": "pcm", "stream": 1}, None),
    ({"input": T, "response_format": "pcm", "stream": "maybe"}, None),
    # speed
    ({"input": T, "speed": 1}, None),
    ({"input": T, "speed": 1.0}, None),
    ({"input": T, "speed": None}, None),
    ({"input": T, "speed": 1.5}, None),
    ({"input": T, "speed": 0.1}, None),
    ({"input": T, "speed": "1"}, None),
    ({"input": T, "response_format": "pcm", "stream": True, "speed": 2.0}, None),
    # sample_rate, instructions and the other declared fields Gepard does not take
    ({"input": T, "sample_rate": 22050}, None),
    ({"input": T, "sample_rate": 16000}, None),
    ({"input": T, "sample_rate": 0}, None),
    ({"input": T, "instructions": "Speak softly."}, None),
    ({"input": T, "instructions": None}, None),
    ({"input": T, "language": "English"}, None),
    ({"input": T, "non_streaming_mode": True}, None),
    ({"input": T, "initial_codec_chunk_frames": 4}, None),
    ({"input": T, "duration_seconds": 2.0}, None),
    ({"input": T, "ambient_sound": "rain"}, None),
    ({"input": T, "word_timestamps": True}, None),
    ({"input": T, "word_timestamps": False}, None),
    ({"input": T, "extra_params": {"temperature": 0.9}}, None),
    ({"input": T, "extra_params": {}}, None),
    ({"input": T, "extra_params": None}, None),
    ({"input": T, "extra_params": [1]}, None),
    # bounds
    ({"input": T, "max_new_tokens": 1}, None),
    ({"input": T, "max_new_tokens": 4096}, None),
    ({"input": T, "max_new_tokens": 0}, None),
    ({"input": T, "max_new_tokens": 4097}, None),
    ({"input": T, "max_new_tokens": 2**63}, None),
    ({"input": T, "max_new_tokens": "3"}, None),
    ({"input": T, "max_new_tokens": 3.0}, None),
    ({"input": T, "max_new_tokens": 2.5}, None),
    ({"input": T, "max_new_tokens": None}, None),
    ({"input": T, "seed": 0}, None),
    ({"input": T, "seed": 2**63 - 1}, None),
    ({"input": T, "seed": 2**63}, None),
    ({"input": T, "seed": -1}, None),
    ({"input": T, "seed": -(2**63)}, None),
    ({"input": T, "seed": -(2**63) - 1}, None),
    ({"input": T, "seed": "7"}, None),
    ({"input": T, "seed": 1.5}, None),
    # voice cloning: zero-shot only in vLLM-Omni 0.30
    ({"input": T, "ref_audio": "data:audio/wav;base64,AAAA"}, CLONE),
    ({"input": T, "ref_audio": ["data:audio/wav;base64,AAAA"]}, CLONE),
    ({"input": T, "ref_audio": "data:audio/wav;base64,AAAA", "ref_text": "Hi."}, CLONE),
    ({"input": T, "ref_text": "Hi."}, CLONE),
    ({"input": T, "ref_audio_2": "data:audio/wav;base64,AAAA"}, CLONE),
    ({"input": T, "speaker_embedding": [0.1, 0.2]}, CLONE),
    ({"input": T, "x_vector_only_mode": True}, CLONE),
    ({"input": T, "task_type": "Base"}, CLONE),
    ({"input": T, "task_type": "Other"}, CLONE),
    ({"input": T, "references": [{"audio_path": "data:audio/wav;base64,AAAA", "text": "Hi."}]}, CLONE),
    ({"input": T, "ref_audio": None, "ref_text": None}, CLONE),
    # where we differ on purpose
    ({"input": T, "temperature": 0.9}, DIFF_UNKNOWN),
    ({"input": T, "top_k": 3}, DIFF_UNKNOWN),
    ({"input": "\u200b"}, DIFF_TEXT),
    ({"input": "word " * 500}, DIFF_TEXT),
]


def _expected(body: dict, mark) -> tuple[bool, str | None]:
    ref = vllm.decide(body, MODEL)
    if isinstance(mark, tuple):
        assert ref[0], f"a DIFF case must be one vLLM-Omni accepts (else it is no difference): {body}"
        return (mark[0] == "accept", ref[1] if mark[0] == "accept" else None)
    return ref


def _ours(body: dict) -> tuple[bool, str | None]:
    from gepard_demo.streaming.text_input import TextError, clean_text

    try:
        req = parse_speech_request(body, MODEL)
        clean_text(req.text)  # what the server's session checks before any work
    except (RequestError, TextError):
        return False, None
    return True, req.mode


def _id(case) -> str:
    return json.dumps(case[0])[:70]


@pytest.mark.parametrize("body, mark", CORPUS, ids=[_id(c) for c in CORPUS])
def test_decision_and_stream_mode_equal_vllm_omni(body, mark):
    assert _ours(body) == _expected(body, mark)


def test_the_known_mismatches_are_decided_as_vllm_omni_does():
    """The cases the issue names, spelt out (they are in the corpus too)."""
    pcm = {"input": T, "response_format": "pcm"}
    assert vllm.decide({**pcm, "stream": True}, MODEL) == _ours({**pcm, "stream": True}) == (True, "sse")
    assert _ours({**pcm, "stream_format": "audio"}) == (True, "raw")
    assert _ours({**pcm, "stream_format": "sse"}) == (True, "sse")
    assert _ours({"input": T, "stream": True}) == (True, "sse")  # wav streams too
    assert _ours({"input": T}) == (True, "none")


def test_our_field_table_is_the_adapters():
    """The refused-when-set fields of GEPARD_RULES are exactly the adapter's list in the wheel,
    so a field added there shows up here."""
    assert set(vllm.unsupported_fields()) == set(CLONING_FIELDS) | set(UNSUPPORTED_FIELDS)
    assert {r.field for r in GEPARD_RULES} >= set(vllm.unsupported_fields())
    validate, adapter, _ = vllm.gepard_adapter()
    assert (adapter.max_new_tokens_min, adapter.max_new_tokens_max) == (1, 4096)


def test_every_request_our_clients_send_validates_in_vllm_omni():
    from gepard_demo.serving.client import request_body

    for mode in ("raw", "sse", "none"):
        for fmt in ("pcm", "wav"):
            body = request_body(T, seed=3, max_new_tokens=20, mode=mode, response_format=fmt)
            assert vllm.decide(body, MODEL) == (True, mode), body
            assert _ours(body) == (True, mode)
    assert vllm.decide(request_body(T), MODEL) == (True, "raw")  # the eval client's default


def test_guidance_fields_would_pass_vllm_omni_unread_so_clients_only_send_them_where_taken():
    """Why eval and the app refuse CFG against a server that does not say it takes guidance:
    vLLM-Omni's request model accepts a body with our cfg fields and drops them (no error, so
    the audio would silently be unguided); our server applies them. CFG off sends nothing extra."""
    from gepard_demo.serving.client import guidance_fields, request_body
    from gepard_demo.settings import SamplingSettings
    from gepard_demo.serving.cloning import split_extensions

    assert request_body(T, guidance=guidance_fields(SamplingSettings(cfg_frames=5))) == request_body(T)
    body = request_body(T, seed=3, guidance=guidance_fields(SamplingSettings(cfg_scale=2.5, cfg_frames=6)))
    assert body["cfg_scale"] == 2.5 and body["cfg_frames"] == 6
    assert vllm.decide(body, MODEL) == (True, "raw")
    parsed = vllm.request_model().model_validate(body)
    assert not hasattr(parsed, "cfg_scale") and "cfg_scale" not in parsed.model_dump()
    plain, extensions = split_extensions(body)  # our server takes them apart from the protocol
    assert _ours(plain) == (True, "raw") and extensions == {"cfg_scale": 2.5, "cfg_frames": 6}


def test_a_cloning_request_is_vllm_omnis_own_field_and_its_gepard_refuses_it(tmp_path):
    """Eval's served engine sends a reference voice in vLLM-Omni's own `ref_audio` field: its
    request model takes the body as is; its Gepard adapter refuses it (0.30 does not clone);
    our server with a compressor accepts it (docs/DEPLOY.md lists the difference)."""
    from gepard_demo.serving.client import audio_data_url, request_body

    wav = tmp_path / "me.wav"
    wav.write_bytes(b"RIFF....WAVEfmt ")
    body = request_body(T, seed=3, max_new_tokens=20, ref_audio=audio_data_url(wav))
    assert body["ref_audio"].startswith("data:audio/")
    assert body["ref_audio"].endswith(base64.b64encode(wav.read_bytes()).decode())
    assert vllm.request_model().model_validate(body).ref_audio == body["ref_audio"]
    assert vllm.decide(body, MODEL) == (False, None)


# -- the same corpus over HTTP, against a running server ---------------------------------------

@pytest.fixture(scope="module")
def server(tiny_engine, tiny_codec):  # noqa: F811
    from gepard_demo.serving.server import build_speech_app

    sampling = tiny_engine.default_sampling().replace(max_frames=2)  # accepted requests stay cheap
    app = build_speech_app(tiny_engine, tiny_codec, sampling, StreamSettings(first_chunk_frames=1, chunk_frames=1))
    with serve_in_thread(app, "speech-server-conformance") as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            yield client


def _served_mode(r: httpx.Response) -> str:
    if r.headers["content-type"].startswith("text/event-stream"):
        return "sse"
    if r.headers.get("content-length") is None:  # chunked: a streamed body
        return "raw"
    return "none"


def test_the_server_decides_the_corpus_as_vllm_omni_does(server):
    wrong = []
    for body, mark in CORPUS:
        if isinstance(body.get("max_new_tokens"), int) and 2 < body["max_new_tokens"] <= 4096:
            body = {**body, "max_new_tokens": 2}
        accepted, mode = _expected(body, mark)
        r = server.post("/v1/audio/speech", json=body)
        got = (r.status_code == 200, _served_mode(r) if r.status_code == 200 else None)
        if got != (accepted, mode):
            wrong.append((body, (accepted, mode), got, r.status_code, r.text[:200]))
        elif not accepted:
            err = r.json()["error"]
            assert r.status_code in (400, 404) and err["code"] == r.status_code and err["message"], body
    assert not wrong, "\n".join(map(str, wrong))
