"""One Generate's controls read once, where it enters (controls.read_controls -> PageControls, whose
request is the SessionRequest every host takes), and its thread's outcome returned as a value
(jobs.work.WorkOutcome): the real tiny engine and codec, a real WAV folder and job registry."""

from __future__ import annotations

import dataclasses
import threading

import pytest
from tests.support.app_fixtures import new_id, tiny_codec  # noqa: F401  (fixture)

from gepard_demo.host_settings import TrafficSettings
from gepard_demo.settings import FeedSettings, SamplingSettings, SettingsError, StreamSettings
from gepard_demo.streaming.seams import SessionRequest
from gepard_demo.ui.page.controls import CONTROL_NAMES, PageControls, read_controls


def test_the_controls_are_read_once_into_the_sessions_request():
    asked = []
    traffic = TrafficSettings.for_batch(2, max_text_chars=300)
    controls = read_controls({"text": "Hello there.", "temperature": 0.7, "seed": "5", "random_seed": False,
                              "chunk_frames": 12, "ref_audio": "a clip"},
                             speaker=lambda clip: asked.append(clip) or "its prefix", traffic=traffic, request_start=1.5)
    assert isinstance(controls, PageControls) and isinstance(controls.request, SessionRequest)
    assert controls.request == SessionRequest("Hello there.", SamplingSettings(temperature=0.7, seed=5),
                                              StreamSettings(chunk_frames=12), request_start=1.5, speaker="its prefix",
                                              max_text_chars=300, max_ahead_s=traffic.max_ahead_s, words_per_s=None)
    assert asked == ["a clip"]  # the host's voices asked once, at the door
    assert controls.sampling is controls.request.sampling and controls.reference == "a clip"
    # An API call may leave later controls out: the values a take keeps hold every one, and cannot change.
    assert set(controls.values) == set(CONTROL_NAMES) and controls.values["top_k"] == 0
    with pytest.raises(TypeError):
        controls.values["temperature"] = 2.0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        controls.request = None  # type: ignore[misc]
    # Text arriving as written: its pace goes with the request.
    written = read_controls({"text": "Hi.", "text_arrival": "as written", "words_per_s": 4}, lambda clip: None, traffic)
    assert written.request.words_per_s == FeedSettings(text_arrival="as written", words_per_s=4).rate == 4


def test_a_bad_control_is_refused_at_the_door_naming_it():
    with pytest.raises(SettingsError, match="top_k must be a whole number") as err:
        read_controls({"text": "Hi.", "top_k": 2.5}, lambda clip: pytest.fail("no voice for a refused request"),
                      TrafficSettings())
    assert err.value.field == "top_k"


class _Breaks:
    """The tiny engine, failing after its second frame: a fault in the middle of a Generate."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def stream_frames(self, request):
        for k, step in enumerate(self.inner.stream_frames(request)):
            if k == 2:
                raise RuntimeError("the engine broke")
            yield step


@pytest.mark.parametrize("breaks", [False, True], ids=["ends", "fails"])
def test_the_jobs_thread_returns_its_outcome(tiny_engine, tiny_codec, tmp_path, breaks):
    from gepard_demo.ui.captions import CaptionDesk
    from gepard_demo.ui.hosts.model_host import ModelHost
    from gepard_demo.ui.jobs.registry import JobRegistry
    from gepard_demo.ui.jobs.wav_sink import WavFolder
    from gepard_demo.ui.jobs.work import JobWork, WorkOutcome

    host = ModelHost(_Breaks(tiny_engine) if breaks else tiny_engine, tiny_codec, requested="tiny")
    job = JobRegistry(TrafficSettings()).claim(new_id())
    controls = read_controls({"text": "Hello.", "max_frames": 8}, lambda clip: None, TrafficSettings())
    session = host.new_session(controls.request)
    wavs = WavFolder(tmp_path)
    outcome = JobWork(host, CaptionDesk(), wavs)(job, session, wavs.sink(job.job_id, session.sample_rate),
                                                 threading.Event())
    assert isinstance(outcome, WorkOutcome) and job.finished
    if breaks:
        assert isinstance(outcome.error, RuntimeError) and str(outcome.error) == "the engine broke"
        assert job.error == repr(outcome.error)
    else:
        assert outcome == WorkOutcome() and job.error is None and session.stats.frames == 8
