"""Generation semantics on the tiny model: cache correctness, seeds, stop and budget."""

import pytest
import torch

from gepard_demo.settings import SamplingSettings, SettingsError
from gepard_demo.model.request import FrameRequest

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

TEXTS = ["Hello world", "The weather is sunny today.", "Hi"]


def _full_forward(engine, text, frames):
    """One uncached forward over prompt + fed-back frames: hidden rows that sample each frame."""
    talker = engine.talker
    prompt = torch.tensor([engine.prompt_ids(text)])
    with torch.inference_mode():
        embeds = talker.embed_prompt(prompt)
        if len(frames) > 1:
            embeds = torch.cat([embeds, talker.embed_frame(frames[:-1]).unsqueeze(0)], dim=1)
        hidden = talker.model(inputs_embeds=embeds, use_cache=False).last_hidden_state[0]
        rows = hidden[prompt.shape[1] - 1 :]
        return talker.head_logits(rows)


@pytest.mark.parametrize("batch", [1, 3])
def test_incremental_decode_matches_full_forward(layout_engine, batch):
    settings = SamplingSettings(greedy=True, max_frames=40, stop_threshold=0.999)
    results = layout_engine.generate(TEXTS[:batch], settings)
    for res in results:
        logits, p_stop = _full_forward(layout_engine, res.text, res.frames)
        steps = res.num_frames
        # Greedy codes are the argmax of the full-forward logits at every step...
        assert torch.equal(logits[:steps].argmax(-1), res.frames)
        # ...and the recorded stop probabilities are the full forward's, within fp32 noise.
        assert torch.allclose(p_stop[:steps], torch.tensor(res.p_stop[:steps]), atol=1e-5)


def test_same_seed_same_frames_solo_and_in_a_batch_of_three(layout_engine):
    settings = [SamplingSettings(seed=s, max_frames=60) for s in (11, 22, 33)]
    batched = layout_engine.generate(TEXTS, settings)
    for text, s, res in zip(TEXTS, settings, batched):
        solo = layout_engine.generate([text], s)[0]
        assert res.seed == s.seed
        assert torch.equal(solo.frames, res.frames)
        assert (solo.stop_fired, solo.stop_frame, solo.runaway) == (res.stop_fired, res.stop_frame, res.runaway)
    again = layout_engine.generate([TEXTS[1]], settings[1])[0]
    assert torch.equal(again.frames, batched[1].frames)
    other = layout_engine.generate([TEXTS[1]], settings[1].replace(seed=99))[0]
    assert not torch.equal(other.frames[:5], batched[1].frames[:5])


def test_unseeded_request_reports_a_seed_that_replays_it(layout_engine):
    first = layout_engine.generate([TEXTS[0]], SamplingSettings(max_frames=30))[0]
    replay = layout_engine.generate([TEXTS[0]], SamplingSettings(max_frames=30, seed=first.seed))[0]
    assert torch.equal(first.frames, replay.frames)


def _force_stop_logit(engine, value):
    head = engine.talker.stop_head
    saved = (head.weight.detach().clone(), head.bias.detach().clone())
    with torch.no_grad():
        head.weight.zero_()
        head.bias.fill_(value)
    return saved


def _restore(engine, saved):
    with torch.no_grad():
        engine.talker.stop_head.weight.copy_(saved[0])
        engine.talker.stop_head.bias.copy_(saved[1])


def test_stop_forced_high_gives_exactly_one_frame(layout_engine):
    saved = _force_stop_logit(layout_engine, 20.0)
    try:
        res = layout_engine.generate(TEXTS, SamplingSettings(seed=1, max_frames=50))
        steps = list(layout_engine.stream_frames(FrameRequest("Hi", SamplingSettings(seed=1, max_frames=50))))
    finally:
        _restore(layout_engine, saved)
    for r in res:
        assert r.num_frames == 1 and r.stop_fired and r.stop_frame == 1 and not r.runaway
        assert len(r.p_stop) == 2  # the committed SOS frame, then the stop step
    assert [s.codes is not None for s in steps] == [True, False]
    assert steps[-1].done == "stop"


def test_stop_forced_low_hits_the_budget_and_reports_a_runaway(layout_engine):
    saved = _force_stop_logit(layout_engine, -20.0)
    try:
        res = layout_engine.generate(TEXTS, SamplingSettings(seed=1, max_frames=25))
    finally:
        _restore(layout_engine, saved)
    for r in res:
        assert r.num_frames == 25 and r.runaway and not r.stop_fired and r.stop_frame is None
        assert len(r.p_stop) == 25


def test_rows_finish_on_their_own(layout_engine):
    settings = [SamplingSettings(seed=5, max_frames=m) for m in (3, 17, 9)]
    res = layout_engine.generate(TEXTS, settings)
    for r, s in zip(res, settings):
        assert 1 <= r.num_frames <= s.max_frames
        assert r.stop_fired != r.runaway
    assert all(int(r.frames.max()) < 8 and int(r.frames.min()) >= 0 for r in res)
    levels = torch.tensor(layout_engine.config.audio_head_levels)
    assert all(bool((r.frames < levels).all()) for r in res)


def test_stream_frames_equals_generate(layout_engine):
    s = SamplingSettings(seed=7, max_frames=80)
    steps = list(layout_engine.stream_frames(FrameRequest(TEXTS[1], s)))
    res = layout_engine.generate([TEXTS[1]], s)[0]
    frames = torch.stack([st.codes for st in steps if st.codes is not None])
    assert torch.equal(frames, res.frames)
    assert [st.p_stop for st in steps] == pytest.approx(res.p_stop, abs=1e-6)
    assert steps[-1].done in ("stop", "budget")
    assert all(st.done is None for st in steps[:-1])


def test_top_k_one_equals_greedy_and_greedy_ignores_seed(layout_engine):
    greedy = layout_engine.generate([TEXTS[0]], SamplingSettings(greedy=True, seed=1, max_frames=30))[0]
    greedy2 = layout_engine.generate([TEXTS[0]], SamplingSettings(greedy=True, seed=2, max_frames=30))[0]
    top1 = layout_engine.generate([TEXTS[0]], SamplingSettings(top_k=1, seed=3, max_frames=30))[0]
    assert torch.equal(greedy.frames, greedy2.frames)
    assert torch.equal(greedy.frames, top1.frames)


@pytest.mark.parametrize(
    "bad",
    [dict(temperature=0.0), dict(top_k=-1), dict(stop_threshold=1.0), dict(max_frames=0), dict(max_frames=10**6), dict(seed=2**63)],
)
def test_bad_settings_are_rejected_before_any_work(layout_engine, bad):
    with pytest.raises(SettingsError):
        layout_engine.generate(["Hi"], SamplingSettings(**bad))


def test_fused_heads_and_embedding_equal_the_checkpoint_modules(layout_engine):
    talker = layout_engine.talker
    torch.manual_seed(0)
    hidden = torch.randn(3, talker.config.hidden_size)
    codes = torch.stack([torch.randint(0, n, (3,)) for n in talker.config.audio_head_levels], dim=1)
    with torch.inference_mode():
        logits, _ = talker.head_logits(hidden)
        for i, (head, n) in enumerate(zip(talker.codebook_heads, talker.config.audio_head_levels)):
            assert torch.allclose(logits[:, i, :n], head(hidden), atol=1e-6)
            assert torch.isinf(logits[:, i, n:]).all()
        parts = torch.cat([emb(codes[:, i]) for i, emb in enumerate(talker.audio_embeddings)], dim=-1)
        expected = talker.audio_embed_proj(parts) * talker.audio_embed_scale
        assert torch.allclose(talker.embed_frame(codes), expected, atol=1e-6)
