"""`python app.py --server-url URL`: the page in front of a served model. A real speech server
(`python -m gepard_demo serve`) and a real Gradio app, two processes on 127.0.0.1; the page's
Generate streams the server's audio through the same PCM route, the banner names the server
and what it fixes, and the controls it cannot honour are disabled with the reason."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from tests.support.app_fixtures import (Listener, args, free_port, generate_with_stream, lsb_apart, new_id, start_process,
                          stop_process)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FRAMES = 24
SERVER = dict(temperature=0.7, stop_threshold=0.99)  # the sampling the served_app's server fixes


@pytest.fixture(scope="module")
def served_app(tiny_cache_dir, tmp_path_factory):
    logs = tmp_path_factory.mktemp("served-app")
    env = {**os.environ, "GEPARD_CACHE_DIR": str(tiny_cache_dir)}
    sport, aport = free_port(), free_port()
    server = start_process([sys.executable, "-m", "gepard_demo", "serve", "--model", "tiny", "--port", str(sport),
                     "--log-level", "warning", "--temperature", "0.7", "--stop-threshold", "0.99", "--chunk-frames", "5", "--first-chunk-frames", "3"],
                    sport, logs / "server.log", env)
    try:
        app = start_process([sys.executable, "app.py", "--server-url", f"http://127.0.0.1:{sport}", "--port", str(aport)],
                     aport, logs / "app.log", env)
        try:
            yield f"http://127.0.0.1:{aport}", f"http://127.0.0.1:{sport}"
        finally:
            stop_process(app)
    finally:
        stop_process(server)


def test_banner_and_disabled_controls(served_app):
    url, server_url = served_app
    config = httpx.get(f"{url}/config", timeout=30).json()
    text = json.dumps(config)
    assert server_url in text and "The server fixes" in text and "random weights" in text
    assert "temperature 0.7" in text and "first chunk frames 3, chunk frames 5" in text  # read from the server
    by_id = {c["props"].get("elem_id"): c["props"] for c in config["components"] if c.get("props", {}).get("elem_id")}
    for elem in ("gepard-temperature", "gepard-top-k", "gepard-stop-threshold", "gepard-chunk", "gepard-fade"):
        assert by_id[elem]["interactive"] is False and "Fixed by the server" in by_id[elem]["info"], elem
        # the fixed control shows the server's value, not a default it cannot apply
    assert by_id["gepard-temperature"]["value"] == 0.7 and by_id["gepard-chunk"]["value"] == 5
    # our server clones and takes guidance (its /v1/models entry says so): those stay the user's
    for elem in ("gepard-text", "gepard-max-frames", "gepard-ref-audio", "gepard-cfg-scale", "gepard-cfg-frames"):
        assert by_id[elem].get("interactive") is not False, elem
    # The seed is the client's to choose; its box is off only while "random seed" is ticked.
    assert "Fixed by the server" not in (by_id["gepard-seed"].get("info") or "")
    assert (by_id["gepard-seed"].get("interactive") is False) == (by_id["gepard-random-seed"]["value"] is True)


def test_generate_streams_the_servers_audio_through_the_page(served_app):
    from gradio_client import Client

    url, server_url = served_app
    text = "Hello from the served model."
    (status, wav, stats, _plot), listener = generate_with_stream(Client(url, verbose=False), url, text=text, seed=77,
                                                                 max_frames=FRAMES, **SERVER)
    assert status.startswith("Done") and "`77`" in status
    assert "| frames | 24 |" in stats and "runaway" in stats  # from the server's done event
    played = np.frombuffer(bytes(listener.data), dtype="<f4")
    page_wav, sr = sf.read(wav, dtype="float32")
    assert sr == 22050 and np.array_equal(played, page_wav) and len(played) > 0

    # the same request straight to the server: the page played exactly its samples
    direct = httpx.post(f"{server_url}/v1/audio/speech", timeout=120, json={
        "input": text, "seed": 77, "max_new_tokens": FRAMES, "response_format": "pcm"})
    assert direct.status_code == 200
    assert np.array_equal(played, np.frombuffer(direct.content, "<i2").astype(np.float32) / 32768.0)


def test_text_as_written_goes_word_by_word_to_the_servers_websocket(served_app):
    """The page's "as written" mode in front of a server: the words go over its speech WebSocket
    at the page's pace; each sentence is spoken with segment k's seed, so the page plays exactly
    what REST makes for each sentence alone, in order; each sentence's wait is counted."""
    from gradio_client import Client

    from gepard_demo.streaming.segments import segment_seed
    from gepard_demo.streaming.text_feed import write

    url, server_url = served_app
    text = "Hello there. The server speaks each sentence as it closes. Then the last one."
    (status, wav, stats, _plot), listener = generate_with_stream(
        Client(url, verbose=False), url, text=text, seed=77, max_frames=FRAMES, text_arrival="as written", words_per_s=20,
        **SERVER)
    assert status.startswith("Done"), status
    units = write(text, 20).units
    assert len(units) == 3 and "| text as written | 3 sentences" in stats, stats
    played = np.frombuffer(bytes(listener.data), dtype="<f4")
    page_wav, _ = sf.read(wav, dtype="float32")
    assert np.array_equal(played, page_wav) and len(played) > 0
    alone = []  # each sentence alone through REST, with segment k's seed
    for k, unit in enumerate(units):
        r = httpx.post(f"{server_url}/v1/audio/speech", timeout=120, json={
            "input": unit, "seed": segment_seed(77, k), "max_new_tokens": FRAMES, "response_format": "pcm"})
        assert r.status_code == 200
        alone.append(np.frombuffer(r.content, "<i2").astype(np.float32) / 32768.0)
    want = np.concatenate(alone)
    # The same audio, up to the one LSB a pooled codec call may move a sample by (the server
    # decodes the sentences made ahead beside each other: docs/DESIGN.md, "What is exact").
    assert lsb_apart(played, want) <= 1


def test_stop_ends_text_as_written_while_it_is_still_being_written(served_app):
    """Stop after the first sentence's audio, with the rest of the text still being written (2
    words a second): the page's WebSocket to the server closes and the Generate ends at once."""
    import time

    from gradio_client import Client

    url, _ = served_app
    job = new_id()
    listener = Listener(url, job)
    listener.start()
    client = Client(url, verbose=False)
    text = "Hi there. " + "This sentence is still being written when Stop comes, " * 3 + "and so it never ends."
    running = client.submit(*args(job, text=text, max_frames=FRAMES, text_arrival="as written", words_per_s=2, **SERVER),
                            api_name="/generate")
    deadline = time.monotonic() + 60
    while not listener.data and time.monotonic() < deadline:
        time.sleep(0.02)
    assert listener.data, "no audio came"
    client.predict(job, api_name="/stop")
    asked = time.monotonic()
    status = running.result(timeout=60)[0]
    assert status.startswith("Stopped"), status
    assert time.monotonic() - asked < 10  # a hang guard: the text alone would take 15 s more


def test_a_reference_voice_and_guidance_reach_the_server(served_app, tmp_path):
    """The page's reference and CFG go with the request: the page plays exactly what the server
    makes for the same reference file, seed and cfg fields, which is not the plain voice."""
    from gradio_client import Client, handle_file
    from tests.support.sound import voice_like

    from gepard_demo.serving.client import audio_data_url

    url, server_url = served_app
    ref = tmp_path / "me.wav"
    sf.write(ref, voice_like(4.0, 22050, seed=5), 22050, subtype="PCM_16")
    text = "A cloned and guided voice."
    values = args("", text=text, seed=78, max_frames=FRAMES, ref_audio=handle_file(str(ref)), cfg_scale=2.5, cfg_frames=6,
                  **SERVER)
    status, wav, _stats, _plot = Client(url, verbose=False).submit(*values, api_name="/generate").result(timeout=180)
    assert status.startswith("Done"), status
    page, _ = sf.read(wav, dtype="float32")

    def direct(**extra):
        r = httpx.post(f"{server_url}/v1/audio/speech", timeout=180, json={
            "input": text, "seed": 78, "max_new_tokens": FRAMES, "response_format": "pcm", **extra})
        assert r.status_code == 200, r.text
        return np.frombuffer(r.content, "<i2").astype(np.float32) / 32768.0

    # The same audio (up to a pooled codec call's LSB, should the last test's rows still be leaving
    # the server's batch), and not the plain voice's.
    assert lsb_apart(page, direct(ref_audio=audio_data_url(ref), cfg_scale=2.5, cfg_frames=6)) <= 1
    plain = direct()
    assert len(page) != len(plain) or lsb_apart(page, plain) > 1


def test_the_guardrails_reach_the_server_and_its_report_comes_back(served_app):
    """In front of our server (its /v1/models lists guardrails) the page's guardrails go with the
    request: the page plays what the server makes with those fields, and shows the force stop and
    the probe from the server's done event."""
    from gradio_client import Client

    url, server_url = served_app
    text = "A guarded voice."
    values = args("", text=text, seed=79, max_frames=FRAMES, repetition_penalty=1.3, repetition_window=8,
                  force_stop_frames="15", **SERVER)
    status, wav, stats, _plot = Client(url, verbose=False).submit(*values, api_name="/generate").result(timeout=120)
    assert status.startswith("Done"), status
    assert "force-stopped" in stats and "frames 0-9:" in stats and "| frames | 15 |" in stats, stats
    page, _ = sf.read(wav, dtype="float32")
    r = httpx.post(f"{server_url}/v1/audio/speech", timeout=120, json={
        "input": text, "seed": 79, "max_new_tokens": FRAMES, "response_format": "pcm",
        "repetition_penalty": 1.3, "repetition_window": 8, "force_stop_frames": 15})
    assert r.status_code == 200 and r.headers["x-gepard-ended-by"] == "force_stop"
    assert np.array_equal(page, np.frombuffer(r.content, "<i2").astype(np.float32) / 32768.0)


def test_a_server_without_guardrails_greys_them_and_refuses_them():
    """vLLM-Omni would drop the fields unread: the page says so on the controls, and a request that
    uses them is refused naming the field rather than silently unguarded."""
    from gepard_demo.ui.hosts.served import NO_GUARDRAILS_REASON, ServedHost, ServedSession

    host = ServedHost(client=None, entry={"id": "gepard", "guidance": True})  # no "guardrails"
    locked = host.locked_controls()
    assert {k: locked[k] for k in ("repetition_penalty", "repetition_window", "force_stop_frames")} == \
        dict.fromkeys(("repetition_penalty", "repetition_window", "force_stop_frames"), NO_GUARDRAILS_REASON)
    from gepard_demo.settings import SamplingSettings, SettingsError, StreamSettings
    from gepard_demo.streaming.seams import SessionRequest

    for change, field in (({"repetition_penalty": 1.2}, "repetition_penalty"), ({"force_stop_frames": "auto"}, "force_stop_frames")):
        with pytest.raises(SettingsError, match=field):
            ServedSession(
                None, SessionRequest("Hello.", SamplingSettings(**change), StreamSettings()), features=host.features
            )
    ServedSession(
        None, SessionRequest("Hello.", SamplingSettings(), StreamSettings()), features=host.features
    )  # unguarded: fine



@pytest.mark.parametrize("endpoint", ["/generate", "/speak"])
def test_a_sampling_setting_the_server_fixes_is_refused_naming_it(served_app, endpoint):
    """The server runs at its own temperature (0.7 here): asking for 0.9 used to run at 0.7 without
    a word. Now it is refused naming the field, on the page's Generate and through /speak; left
    out, the API sends what the page shows, the server's value, and it runs."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    url, _ = served_app
    client = Client(url, verbose=False)
    asked = args(new_id(), text="Hi.", max_frames=FRAMES, **{**SERVER, "temperature": 0.9}) \
        if endpoint == "/generate" else ["Hi."]
    with pytest.raises(AppError) as err:
        client.predict(*asked, **({} if endpoint == "/generate" else {"temperature": 0.9}), api_name=endpoint)
    assert ("temperature is fixed by the server (this server runs temperature 0.7): send 0.7 or leave it out, "
            "got 0.9") in str(err.value)
    wav, summary = client.predict("Hi.", seed=3, max_frames=FRAMES, api_name="/speak")
    assert summary["status"].startswith("Done") and summary["frames"] > 0


def test_a_server_that_does_not_report_its_sampling_takes_the_declared_one():
    """vLLM-Omni does not say its sampling: the page shows the declared defaults, and refuses another value."""
    from gepard_demo.settings import SamplingSettings, SettingsError
    from gepard_demo.ui.hosts.served import ServedHost

    host = ServedHost(client=None, entry={"id": "gepard"})
    host.check_fixed(SamplingSettings(seed=5, max_frames=40))  # what goes with a request may change
    for change in ({"temperature": 0.9}, {"top_k": 4}, {"greedy": True}, {"stop_threshold": 0.7}):
        with pytest.raises(SettingsError, match=f"{next(iter(change))} is fixed by the server") as err:
            host.check_fixed(SamplingSettings(**change))
        assert err.value.field == next(iter(change)) and "gepard_config.json" in str(err.value)
