"""Left-padded batches of different-length prompts equal solo runs, on both backbone layouts.

On the all-full-attention layout (Gepard-1.0) transformers 5.14's own 2-D mask path raises
(`has_previous_state can only be called on LinearAttention layers`); generation.py builds the
full-attention mask itself. These tests fail if a transformers upgrade breaks that path (or the
hybrid one): a wrong mask shows up as frames or stop probabilities that differ from solo runs.
"""

import pytest
import torch
from transformers import DynamicCache

from gepard_demo.model.generation import full_attention_only, padding_mask
from gepard_demo.settings import SamplingSettings

pytestmark = pytest.mark.numerics  # results depend on the CPU's kernels: make test-isa runs it under other ISAs

TEXTS = ["Hi", "The weather is sunny today, with a light breeze from the west.", "Hello world"]


def _greedy(max_frames, threshold=0.999):
    return SamplingSettings(greedy=True, max_frames=max_frames, stop_threshold=threshold)


def test_padded_batch_equals_solo_runs(layout_engine):
    lengths = {len(layout_engine.prompt_ids(t)) for t in TEXTS}
    assert len(lengths) == 3  # really padded, three different widths
    # Rows finish at different steps: budgets 6, 20, 13, so the cache drops rows mid-run.
    settings = [_greedy(6), _greedy(20), _greedy(13)]
    batch = layout_engine.generate(TEXTS, settings)
    for text, s, res in zip(TEXTS, settings, batch):
        solo = layout_engine.generate([text], s)[0]
        assert res.num_frames == solo.num_frames == s.max_frames
        assert torch.equal(res.frames, solo.frames)
        assert res.p_stop == pytest.approx(solo.p_stop, abs=1e-5)


def test_padded_batch_with_a_stop_mid_run_equals_solo(layout_engine):
    # One row stops on the stop head (a low threshold fires at its second step); the others run on.
    settings = [_greedy(15), _greedy(15, threshold=1e-6), _greedy(9)]
    batch = layout_engine.generate(TEXTS, settings)
    assert batch[1].stop_fired and batch[1].num_frames == 1
    for text, s, res in zip(TEXTS, settings, batch):
        solo = layout_engine.generate([text], s)[0]
        assert torch.equal(res.frames, solo.frames)
        assert res.p_stop == pytest.approx(solo.p_stop, abs=1e-5)
        assert (res.stop_fired, res.runaway) == (solo.stop_fired, solo.runaway)


def test_mask_path_per_layout(layout_engine):
    """All-full-attention gets a prepared mask mapping; the hybrid keeps transformers' 2-D path
    untouched (no extra work per step)."""
    talker = layout_engine.talker
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    embeds = torch.zeros(2, 3, talker.config.hidden_size)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    got = padding_mask(talker, mask, embeds, positions, DynamicCache(config=talker.config.backbone))
    if full_attention_only(talker.config.backbone):
        assert isinstance(got, dict) and set(got) == {"full_attention"}
        assert got["full_attention"] is not None
    else:
        assert got is mask
