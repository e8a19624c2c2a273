"""The demo's small parts without a server: job mailboxes, control parsing, model fallback, banner."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from gepard_demo.settings import SettingsError
from gepard_demo.host_settings import TrafficSettings
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.ui.page.banner import banner_markdown
from gepard_demo.ui.page.controls import CONTROL_NAMES, parse_controls
from gepard_demo.ui.jobs.registry import Busy, JobError, JobRegistry, TooManyListeners
from gepard_demo.ui.hosts.model_host import ModelHost, load_model_host
from tests.support.async_clock import run_async, FakeClock


GOOD = dict(
    text="hi", temperature=0.3, top_k=0, greedy=False, stop_threshold=0.5, seed=5, random_seed=False,
    max_frames=100, first_chunk_frames=10, chunk_frames=10, chunk_schedule="ramp", decode_mode="exact", lookback_frames=8,
    fade_ms=0, silence_ms=0, ref_audio=None, cfg_scale=1.0, cfg_frames=0,
    repetition_penalty=1.0, repetition_window=32, force_stop_frames="off", text_arrival="at once", words_per_s=10,
    text_normalization="off", lexicon_entries="",
)


def test_control_names_match_parse():
    assert set(GOOD) == set(CONTROL_NAMES)


def test_parse_controls_keeps_big_seeds_exact_and_names_bad_values():
    sampling, stream = parse_controls({**GOOD, "seed": 2**62 + 1})
    assert sampling.seed == 2**62 + 1
    assert parse_controls({**GOOD, "random_seed": True})[0].seed is None
    assert parse_controls({**GOOD, "top_k": 3.0})[0].top_k == 3
    # The page's seed box is text (a browser's number would round it): exact to the last 63-bit seed.
    assert parse_controls({**GOOD, "seed": " 84605694016262995 "})[0].seed == 84605694016262995
    assert parse_controls({**GOOD, "seed": str(2**63 - 1)})[0].seed == 2**63 - 1
    for key, value, msg in [
        ("seed", str(2**63), r"seed must be in \["),
        ("seed", "12abc", "seed must be a number"),
        ("temperature", float("nan"), "finite"),
        ("temperature", "abc", "must be a number"),
        ("top_k", 1.5, "whole number"),
        ("max_frames", None, "max_frames is empty"),
        ("fade_ms", -1, "fade_ms"),
        ("decode_mode", "x", "decode_mode"),
    ]:
        with pytest.raises(SettingsError, match=msg):
            parse_controls({**GOOD, key: value})


def test_the_text_arrival_controls_read_and_name_bad_values():
    from gepard_demo.ui.page.controls import parse_feed

    assert parse_feed(GOOD).rate is None  # at once
    assert parse_feed({**GOOD, "text_arrival": "as written", "words_per_s": 25}).rate == 25.0
    no_feed = {k: v for k, v in GOOD.items() if k not in ("text_arrival", "words_per_s")}
    assert parse_feed(no_feed).rate is None  # an API client from before them: the text at once
    for key, value, msg in [("text_arrival", "slowly", "text_arrival must be one of at once, as written"),
                            ("words_per_s", 0, r"words_per_s must be in \[1, 100\]"),
                            ("words_per_s", "fast", "words_per_s must be a number")]:
        with pytest.raises(SettingsError, match=msg) as caught:
            parse_feed({**GOOD, key: value})
        assert caught.value.field == key


def test_parse_controls_reads_the_guardrails_and_names_bad_ones():
    s = parse_controls({**GOOD, "repetition_penalty": 1.25, "repetition_window": 0, "force_stop_frames": " auto "})[0]
    assert (s.repetition_penalty, s.repetition_window, s.force_stop_frames) == (1.25, 0, "auto")
    assert parse_controls({**GOOD, "force_stop_frames": "60"})[0].force_stop_frames == 60
    assert parse_controls({**GOOD, "force_stop_frames": 60.0})[0].force_stop_frames == 60  # an API client's number
    assert parse_controls({**GOOD, "force_stop_frames": ""})[0].force_stop_frames is None
    no_guard = {k: v for k, v in GOOD.items() if k not in ("repetition_penalty", "repetition_window", "force_stop_frames")}
    s = parse_controls(no_guard)[0]  # an API client from before the guardrails: off
    assert (s.repetition_penalty, s.force_stop_frames) == (1.0, None)
    for key, value, msg in [
        ("repetition_penalty", 0.9, r"repetition_penalty must be in \[1, 2\]"),
        ("repetition_penalty", 2.5, r"repetition_penalty must be in \[1, 2\]"),
        ("repetition_window", -1, r"repetition_window must be in \[0"),
        ("repetition_window", 1.5, "repetition_window must be a whole number"),
        ("force_stop_frames", "0", r"force_stop_frames must be in \[1, max_frames = 100\]"),
        ("force_stop_frames", "101", "force_stop_frames must be in"),
        ("force_stop_frames", "soon", "force_stop_frames must be 'off', 'auto'"),
        ("force_stop_frames", "12.5", "force_stop_frames must be a whole number"),
    ]:
        with pytest.raises(SettingsError, match=msg):
            parse_controls({**GOOD, key: value})


def test_registry_refuses_bad_ids_and_too_many_running():
    reg = JobRegistry(TrafficSettings(per_client=2, max_running=2))
    for bad in ["", "short", "../../etc/passwd", "a" * 65, None]:
        with pytest.raises(JobError):
            reg.claim(bad)
        with pytest.raises(JobError):
            reg.admit(bad, "1.2.3.4")
    a = reg.claim("job-aaaaaaaa", "1.1.1.1")
    assert reg.get("job-aaaaaaaa") is a
    reg.claim("job-bbbbbbbb", "2.2.2.2")
    with pytest.raises(Busy, match="too many Generates running on this server"):
        reg.claim("job-cccccccc", "3.3.3.3")


def test_registry_sweeps_finished_jobs():
    clock = FakeClock()
    reg = JobRegistry(TrafficSettings(keep_s=60.0), clock=clock)
    done = reg.claim("job-finished")
    done.finish()
    running = reg.claim("job-running")
    clock.now += 60.5
    reg.claim("job-new-one")
    assert reg.get("job-finished") is None
    assert reg.get("job-running") is running
    assert "finished more than 60 s ago" in reg.gone("job-finished")


def test_listeners_for_unclaimed_ids_hold_nothing_a_generate_needs():
    """The lock-out: listeners for ids no Generate claims never fill the registry; when they
    leave, only a cancellation mark stays; a client can hold only so many at once."""
    reg = JobRegistry(TrafficSettings(per_client=2, max_running=2), listeners_per_client=3)

    async def scenario():
        tasks = []
        for i in range(3):
            reg.admit(f"flood-{i:04d}", "6.6.6.6")
            gen = reg.listen(f"flood-{i:04d}", "6.6.6.6")
            tasks.append(asyncio.ensure_future(gen.__anext__()))
        await asyncio.sleep(0.05)
        with pytest.raises(TooManyListeners):
            reg.admit("flood-9999", "6.6.6.6")
        reg.admit("someone-else", "7.7.7.7")  # another client is not affected
        assert reg.waiting_ahead("flood-0002") == 2 and len(reg) == 0
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)

    run_async(scenario)
    assert len(reg) == 0 and reg.waiting_ahead("flood-0000") is None
    reg.admit("flood-9999", "6.6.6.6")  # its slots are free again
    # Both real jobs still fit, and the flooded ids' requests (if any was queued) stop at once.
    assert reg.claim("flood-0000").cancelled
    assert not reg.claim("real-job-1").cancelled


def test_a_waiting_listener_gets_the_audio_once_claimed():
    reg = JobRegistry()

    async def scenario():
        async def consume():
            return b"".join([b async for b in reg.listen("job-late-claim", "1.1.1.1")])

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        job = reg.claim("job-late-claim")
        assert job.created < job.started  # its wait counts as queue time
        job.put(np.ones(3, np.float32))
        job.finish()
        return await task

    data = run_async(scenario)
    np.testing.assert_array_equal(np.frombuffer(data, "<f4"), np.ones(3, np.float32))
    assert reg.get("job-late-claim") is None  # freed with the stream


def test_stop_while_queued_ends_the_listener_and_the_request_at_once():
    reg = JobRegistry()

    async def scenario():
        task = asyncio.ensure_future(reg.listen("job-queued-1", "1.1.1.1").__anext__())
        await asyncio.sleep(0.05)
        assert reg.cancel("job-queued-1") == "queued"
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(task, 1.0)

    run_async(scenario)
    assert reg.claim("job-queued-1").cancelled


def test_mailbox_streams_chunks_put_from_another_thread():
    reg = JobRegistry()
    job = reg.claim("job-stream-1")
    chunks = [np.full(n, i, dtype=np.float32) for i, n in enumerate((5, 0, 7, 3))]

    def produce():
        for c in chunks:
            time.sleep(0.01)
            job.put(c)
        job.finish()

    async def consume():
        t = threading.Thread(target=produce)
        t.start()
        data = b"".join([b async for b in job.iter_bytes()])
        t.join()
        return data

    data = run_async(consume)
    np.testing.assert_array_equal(np.frombuffer(data, "<f4"), np.concatenate(chunks))
    assert not job.cancelled


def test_listener_leaving_early_cancels_the_session():
    reg = JobRegistry()
    job = reg.claim("job-stream-2")
    session = SimpleNamespace(cancelled=False)
    session.cancel = lambda: setattr(session, "cancelled", True)
    job.session = session
    job.put(np.zeros(4, np.float32))

    async def consume_one():
        gen = job.iter_bytes()
        await gen.__anext__()
        await gen.aclose()

    run_async(consume_one)
    assert job.cancelled and session.cancelled


def fake_engine(name, random_weights):
    from gepard_demo.model.engine import ModelInfo

    info = ModelInfo(name=name, path=f"/models/{name}", revision=None, random_weights=random_weights,
                     device="cpu", dtype="float32")
    return SimpleNamespace(model_info=info)


def test_fallback_to_tiny_keeps_the_reason():
    def engine_loader(model, cache_dir):
        if model != "tiny":
            raise RuntimeError("no weights here")
        return fake_engine("tiny", True)

    host = load_model_host("nineninesix/gepard-1.0", engine_loader=engine_loader,
                           codec_loader=lambda e: SimpleNamespace(sample_rate=22050))
    assert host.engine.model_info.name == "tiny"
    assert host.fallback_reason == "RuntimeError: no weights here"
    assert host() is host.engine  # the Eval tab's engine provider
    text = banner_markdown(host)
    assert "random weights" in text and "makes noise" in text
    assert "nineninesix/gepard-1.0" in text and "no weights here" in text and "GEPARD_MODEL=DIR" in text


def test_no_fallback_when_tiny_itself_fails():
    def engine_loader(model, cache_dir):
        raise RuntimeError("broken")

    with pytest.raises(RuntimeError, match="broken"):
        load_model_host("tiny", engine_loader=engine_loader, codec_loader=lambda e: None)


def test_banner_for_real_weights_has_no_warning():
    host = ModelHost(fake_engine("/models/gepard", False), SimpleNamespace(sample_rate=22050), "/models/gepard")
    text = banner_markdown(host)
    assert "random weights" not in text and "did not load" not in text
    assert "/models/gepard" in text


def test_eval_tab_builder_gets_the_host_and_a_broken_one_is_reported():
    import gradio as gr

    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.ui.page.layout import build_demo

    host = ModelHost(fake_engine("tiny", True), SimpleNamespace(sample_rate=22050), "tiny")
    controller = SimpleNamespace(generate=lambda *a: None, stop=lambda *a: None, voices=SimpleNamespace(prepare=lambda a: ""),
                                 read_text_file=lambda f: "")
    seen = []

    def build_eval_tab(provider, speak):
        seen.append((provider, speak))
        gr.Markdown("EVAL-TAB-CONTENT")

    demo = build_demo(host, controller, SamplingSettings(), StreamSettings(), eval_tab=build_eval_tab)
    ((provider, speak),) = seen
    assert provider is host and provider() is host.engine
    # Its way into the Speak tab: every control of the page, then the tabs to switch.
    outputs = speak.outputs()
    assert outputs[0] is speak.controls["text"] and isinstance(outputs[-1], gr.Tabs)
    assert speak.controls["ref_audio"].elem_id == "gepard-ref-audio"
    assert "EVAL-TAB-CONTENT" in str(demo.config)
    broken = build_demo(host, controller, SamplingSettings(), StreamSettings(), eval_tab_error="ImportError: x")
    assert "The Eval tab could not be built" in str(broken.config)


def test_a_job_has_one_producer_and_stop_before_attach_still_cancels():
    reg = JobRegistry()
    job = reg.claim("job-claimed-1")
    with pytest.raises(JobError, match="already running"):
        reg.claim("job-claimed-1")
    assert reg.cancel("job-claimed-1")
    session = SimpleNamespace(cancelled=False)
    session.cancel = lambda: setattr(session, "cancelled", True)
    job.attach(session)  # Stop came before the session existed: it is cancelled on attach
    assert session.cancelled


def test_stats_table_and_plot_say_how_it_ended():
    import json
    import re

    from gepard_demo.settings import SamplingSettings
    from gepard_demo.streaming.session import SynthesisStats
    from gepard_demo.ui.jobs.controller import final_plot
    from gepard_demo.ui.page.views import stats_markdown

    s = SamplingSettings(stop_threshold=0.4, max_frames=50)
    stopped = SynthesisStats(seed=9, frames=3, ended_by=["stop"], complete=True, stop_frame=3, p_stop=[0.1, 0.2, 0.3, 0.9],
                             ttfa_s=0.05, rtf=0.2, speech_s=0.14, audio_s=0.14)
    md = stats_markdown(stopped, s)
    assert "stop head fired after frame 3" in md and "`9`" in md and "50 ms" in md
    svg = final_plot(stopped, s)
    data = json.loads(re.search(r"data-pstop='([^']*)'", svg).group(1).replace("&quot;", '"'))
    assert data["traces"][0]["p"] == [0.1, 0.2, 0.3, 0.9] and data["threshold"] == 0.4
    assert data["traces"][0]["stop"] == 3 and svg.count("gepard-stop-mark") == 1  # where the stop fired
    assert svg.count("<polyline") == 1 and 'data-threshold="0.4"' in svg
    runaway = SynthesisStats(seed=1, frames=50, ended_by=["budget"], complete=True, p_stop=[0.0] * 50)
    assert "runaway" in stats_markdown(runaway, s) and "(50)" in stats_markdown(runaway, s)
    assert "gepard-stop-mark" not in final_plot(runaway, s)  # no stop line
    assert "stopped by the user" in stats_markdown(SynthesisStats(cancelled=True), s)


def _served_host(entry: dict):
    from gepard_demo.serving.client import SpeechClient
    from gepard_demo.ui.hosts.served import ServedHost

    return ServedHost(SpeechClient("http://127.0.0.1:9"), entry)  # never contacted here


def test_a_vllm_omni_server_locks_voice_and_guidance_with_their_own_reasons(tmp_path):
    """vLLM-Omni's /v1/models entry names none of our extensions: the reference voice and the
    CFG controls are disabled with why, the banner says the server does not report its
    settings, and a reference or a guided request that reaches the host anyway is refused
    (not silently sent unguided)."""
    import soundfile as sf

    from gepard_demo.settings import SamplingSettings, StreamSettings
    from gepard_demo.ui.hosts.served import FIXED_REASON, NO_CLONING_REASON, NO_GUIDANCE_REASON
    from gepard_demo.voice.reference_audio import ReferenceAudioError

    host = _served_host({"id": "nineninesix/gepard-1.0", "object": "model"})
    locked = host.locked_controls()
    assert locked["temperature"] == FIXED_REASON and locked["ref_audio"] == NO_CLONING_REASON
    assert locked["cfg_scale"] == locked["cfg_frames"] == NO_GUIDANCE_REASON
    banner = host.banner_markdown()
    assert "does not report their values" in banner and "CFG" not in banner
    ref = tmp_path / "ref.wav"
    sf.write(ref, 0.3 * np.sin(np.arange(22050 * 4) / 5.0), 22050)
    with pytest.raises(ReferenceAudioError, match="does not clone"):
        host.voices().speaker(str(ref))
    assert "not usable" in host.voices().prepare(str(ref))
    with pytest.raises(SettingsError, match="takes no guidance"):
        host.new_session(SessionRequest("Hello.", SamplingSettings(cfg_scale=2.0), StreamSettings()))


def test_our_server_takes_a_reference_and_guidance_from_the_page(tmp_path):
    """Our server's entry says it clones and takes guidance: those controls stay enabled, a
    page reference becomes a 16-bit WAV data URL holding the same samples, and a reference
    the server would refuse is refused here first, with the server's reason."""
    import base64
    import io

    import soundfile as sf

    from gepard_demo.voice.reference_audio import ReferenceAudioError

    host = _served_host({"id": "tiny", "voice_cloning": True, "guidance": True})
    assert not {"ref_audio", "cfg_scale", "cfg_frames"} & set(host.locked_controls())
    assert "a reference voice, CFG" in host.banner_markdown()
    rng = np.random.default_rng(0)
    pcm = (rng.standard_normal(44100 * 4) * 3000).astype(np.int16)  # a browser recording: int16 at 44.1 kHz
    url = host.voices().speaker((44100, pcm)).data_url
    assert url.startswith("data:audio/wav;base64,")
    back, rate = sf.read(io.BytesIO(base64.b64decode(url.split(",", 1)[1])), dtype="int16")
    assert rate == 44100 and np.array_equal(back, pcm)
    assert host.voices().prepare((44100, pcm)).startswith("Reference ready")
    with pytest.raises(ReferenceAudioError, match="too short"):
        host.voices().speaker((22050, pcm[:22050]))
