"""The guardrail settings and the onset-entropy probe, from what they must equal: the authors'
rollout cap computed by hand, each bad value refused naming its field, and the probe's entropy
and NLL recomputed head by head from the talker's own modules (tests/support/authors_reference.py's
plain branch), not from probe.py."""

from __future__ import annotations

import math

import pytest
import torch
from tests.support.authors_reference import Branch

from gepard_demo.model.guards.guardrails import auto_force_stop, force_stop_for
from gepard_demo.model.guards.probe import summary
from gepard_demo.settings import SamplingSettings, SettingsError

TEXT = "Hello world"


@pytest.mark.parametrize("words", [1, 3, 6, 7, 40])
def test_auto_is_four_times_the_expected_frames_clamped(words):
    text = " ".join(["word"] * words)
    by_hand = {1: 94, 3: 163, 6: 267, 7: 300, 40: 300}  # int(4 x (0.7 + 0.4 w) s x 22050 / 1024), at most 300
    assert by_hand[words] == min(300, int(4.0 * (0.7 + 0.4 * words) * 22050 / 1024))
    assert auto_force_stop(text) == by_hand[words]
    # The clamp's lower end (80) never acts: one word already gives 94, for the authors too.


def test_auto_where_the_text_has_no_words_is_refused_naming_the_field():
    with pytest.raises(SettingsError, match="force_stop_frames"):
        auto_force_stop("… — !!")
    with pytest.raises(SettingsError, match="force_stop_frames"):
        force_stop_for(SamplingSettings(force_stop_frames="auto"), "🙂🙂")
    assert force_stop_for(SamplingSettings(), "🙂") is None  # off: nothing to scale
    assert force_stop_for(SamplingSettings(force_stop_frames=33), "🙂") == 33


@pytest.mark.parametrize("change,field", [
    ({"repetition_penalty": 0.9}, "repetition_penalty"),
    ({"repetition_penalty": 2.5}, "repetition_penalty"),
    ({"repetition_penalty": float("nan")}, "repetition_penalty"),
    ({"repetition_window": -1}, "repetition_window"),
    ({"repetition_window": 1.5}, "repetition_window"),
    ({"force_stop_frames": 0}, "force_stop_frames"),
    ({"force_stop_frames": 1001}, "force_stop_frames"),  # above max_frames (1000)
    ({"force_stop_frames": "soon"}, "force_stop_frames"),
    ({"force_stop_frames": True}, "force_stop_frames"),
])
def test_bad_guardrail_settings_are_refused_naming_the_field(change, field):
    with pytest.raises(SettingsError, match=field):
        SamplingSettings(**change)


def test_good_guardrail_settings_pass():
    for change in ({"repetition_penalty": 1.0}, {"repetition_penalty": 2.0}, {"repetition_window": 0},
                   {"force_stop_frames": 1}, {"force_stop_frames": 1000}, {"force_stop_frames": "auto"}):
        SamplingSettings(**change)


def _entropy_by_hand(logits: list[torch.Tensor]) -> float:
    total = 0.0
    for row in logits:
        p = torch.softmax(row.double(), -1)
        total += float(-(p * p.log()).sum())
    return total / len(logits)


def _nll_by_hand(logits: list[torch.Tensor], codes: list[int]) -> float:
    return sum(float(-torch.log_softmax(row.double(), -1)[c]) for row, c in zip(logits, codes)) / len(logits)


@pytest.mark.parametrize("penalty", [1.0, 1.5], ids=["plain", "penalized"])
def test_the_probe_is_the_models_belief_head_by_head(tiny_engine, penalty):
    # Entropy of each head's softmax at temperature 1, averaged over the 32 heads, and the NLL of
    # the committed codes under it; with a penalty, still the unpenalized belief.
    s = SamplingSettings(temperature=0.7, seed=3, max_frames=12, stop_threshold=0.999, repetition_penalty=penalty)
    r = tiny_engine.generate([TEXT], s)[0]
    assert len(r.entropy) == len(r.p_stop) == 12 and len(r.nll) == 12
    branch = Branch(tiny_engine.talker, tiny_engine.prompt_ids(TEXT), tiny_engine.talker.null_prefix.detach())
    for k, codes in enumerate(r.frames):
        heads, _ = branch.heads()
        assert r.entropy[k] == pytest.approx(_entropy_by_hand(heads), abs=1e-4), k
        assert r.nll[k] == pytest.approx(_nll_by_hand(heads, codes.tolist()), abs=1e-4), k
        branch.feed(codes)
    levels = [8, 7, 6, 6] * 8
    assert max(r.entropy) <= sum(math.log(v) for v in levels) / 32 + 1e-6  # at most the uniform belief


def test_the_probe_reads_the_guided_belief(tiny_engine, tiny_model_dir):
    from tests.support.authors_reference import authors_uncond_layout

    s = SamplingSettings(greedy=True, max_frames=6, stop_threshold=0.999, cfg_scale=2.5)
    r = tiny_engine.generate([TEXT], s)[0]
    prefix = tiny_engine.talker.null_prefix.detach()
    cond = Branch(tiny_engine.talker, tiny_engine.prompt_ids(TEXT), prefix)
    uncond = Branch(tiny_engine.talker, authors_uncond_layout(tiny_model_dir), prefix)
    for k, codes in enumerate(r.frames):
        c, _ = cond.heads()
        u, _ = uncond.heads()
        guided = [ui + 2.5 * (ci - ui) for ci, ui in zip(c, u)]
        assert r.entropy[k] == pytest.approx(_entropy_by_hand(guided), abs=1e-4), k
        cond.feed(codes)
        uncond.feed(codes)


def test_the_stop_step_has_an_entropy_and_no_nll(tiny_engine):
    r = tiny_engine.generate([TEXT], SamplingSettings(top_k=1, seed=11, stop_threshold=0.2, max_frames=200))[0]
    assert r.ended_by == "stop"
    assert len(r.entropy) == r.num_frames + 1 and len(r.nll) == r.num_frames
    assert math.isfinite(r.entropy[-1])


def test_the_summary_windows():
    trace = [2.0] * 10 + [1.5] * 30 + [0.5] * 20 + [3.0] * 5
    assert summary(trace) == {"entropy_onset": 2.0, "entropy_settled": 0.5, "entropy_drop": 1.5}
    short = summary([2.0] * 50)  # frames 40-59 not all there
    assert short == {"entropy_onset": 2.0, "entropy_settled": None, "entropy_drop": None}
    assert summary([1.0] * 5)["entropy_onset"] is None
