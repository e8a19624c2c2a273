"""The typed doors between the layers (gepard_demo/model/seams.py, gepard_demo/streaming/seams.py):
every engine, codec, host and session offers its seam's surface itself, each member named (no
`__getattr__` forwarding), and a wrapper's members are its wrapped engine's or codec's."""

from __future__ import annotations

import dataclasses

import pytest
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)

from gepard_demo.batching.codec_pool import CodecPool
from gepard_demo.batching.scheduler import BatchScheduler
from gepard_demo.host_settings import BatchingSettings
from gepard_demo.model.seams import AudioCodec, Engine, FrameEngine, WrappedEngine
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.speed.pipeline import PipelinedEngine
from gepard_demo.streaming.seams import Session, SessionRequest
from gepard_demo.ui.hosts.page_host import PageHost
from gepard_demo.ui.hosts.model_host import ModelHost


def test_no_class_forwards_through_getattr():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = [str(f.relative_to(root)) for pkg in ("gepard_demo", "eval") for f in (root / pkg).rglob("*.py")
             if "def __getattr__(" in f.read_text(encoding="utf-8")]
    assert not found


def test_the_wrappers_are_engines_forwarding_each_member_by_name(tiny_engine):
    scheduler = BatchScheduler(tiny_engine, BatchingSettings(max_batch=1))
    piped = PipelinedEngine(tiny_engine)
    try:
        for engine in (tiny_engine, scheduler, piped):
            assert isinstance(engine, Engine) and isinstance(engine, FrameEngine)
        for wrapper in (scheduler, piped):
            assert isinstance(wrapper, WrappedEngine) and wrapper.engine is tiny_engine
            for name in ("model_info", "config", "tokenizer", "talker"):
                assert getattr(wrapper, name) is getattr(tiny_engine, name), name
            assert wrapper.device == tiny_engine.device
            assert wrapper.default_sampling() == tiny_engine.default_sampling()
            assert wrapper.codec_source() == tiny_engine.codec_source()
            assert wrapper.prompt_ids("Hello there.") == tiny_engine.prompt_ids("Hello there.")
            assert "__getattr__" not in vars(type(wrapper))
        assert scheduler.takes_look_ahead and not piped.takes_look_ahead  # as before: FrameMaker's default
        # generate through the pipeline is the engine's own
        settings = SamplingSettings(seed=3, max_frames=6)
        a, b = piped.generate(["Hi."], settings)[0], tiny_engine.generate(["Hi."], settings)[0]
        assert a.frames.tolist() == b.frames.tolist()
    finally:
        scheduler.close()


def test_the_codec_pool_is_a_codec_forwarding_each_member_by_name(tiny_codec):  # noqa: F811
    pool = CodecPool(tiny_codec)
    assert isinstance(pool, AudioCodec) and isinstance(tiny_codec, AudioCodec)
    for name in ("backend", "sample_rate", "samples_per_frame", "layout", "source", "num_codes", "frame_rate_hz"):
        assert getattr(pool, name) == getattr(tiny_codec, name), name
    assert pool.modules() == tiny_codec.modules()
    codes = [[0] * tiny_codec.layout.num_codes] * 3
    assert (pool.decode(codes) == tiny_codec.decode(codes)).all()


def test_every_host_takes_one_session_request_and_hands_back_a_session(tiny_engine, tiny_codec):  # noqa: F811
    host = ModelHost(tiny_engine, tiny_codec, "tiny")
    assert isinstance(host, PageHost)
    request = SessionRequest("Hello.", SamplingSettings(seed=1, max_frames=4), StreamSettings())
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.text = "changed"  # built once, where the request enters
    session = host.new_session(request)
    assert isinstance(session, Session)
    assert session.text == "Hello." and session.sampling.seed == 1
    assert len(session.run()) > 0 and session.stats.complete


def test_every_engine_takes_one_frame_request_whole():
    """One signature for `stream_frames` on every engine (issue 63): the request, whole, no
    keywords spread into it. Protocol checks at run time see names only, so the signature is
    read here: an engine whose method differs fails."""
    import inspect
    import typing

    from gepard_demo.model.engine import GepardEngine
    from gepard_demo.model.frames import FrameMaker
    from gepard_demo.model.request import FrameRequest
    from gepard_demo.zerogpu.batched import CallBatch

    for cls in (GepardEngine, BatchScheduler, CallBatch, PipelinedEngine, FrameMaker):
        params = list(inspect.signature(cls.stream_frames).parameters.values())
        assert [p.name for p in params] == ["self", "request"], cls
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params), cls
        hints = typing.get_type_hints(cls.stream_frames, localns={"FrameRequest": FrameRequest})
        assert hints["request"] is FrameRequest, cls
    assert [p.name for p in inspect.signature(FrameEngine.stream_frames).parameters.values()] == ["self", "request"]
