"""Metrics, normalization, bootstrap and set loading on hand-computed cases (fast)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eval.jsonio import append_jsonl, read_jsonl
from eval.runs.seeds import utterance_seed
from eval.runs.sets import SetError, load_set
from eval.scoring.bootstrap import mean_ci, paired_mean_diff_ci, paired_ratio_diff_ci, ratio_ci
from eval.scoring.metrics import length_figures, word_errors
from gepard_demo.units import expected_speech_s
from eval.scoring.normalize import normalize


def test_word_errors_hand_computed():
    # ref a b c d / hyp a x c: b->x substitution, d deleted at the end.
    e = word_errors("a b c d", "a x c")
    assert (e.n_ref, e.hits, e.sub, e.dele, e.ins) == (4, 2, 1, 1, 0)
    assert e.wer == pytest.approx(0.5)
    assert e.end_deletions == 1
    # characters: "a b c d" (7) -> "a x c": b->x, then " d" deleted = 3 edits
    assert e.char_edits == 3 and e.n_ref_chars == 7
    # an insertion at the front, two deletions at the end
    e = word_errors("a b c d", "x a b")
    assert (e.sub, e.dele, e.ins, e.end_deletions) == (0, 2, 1, 2)
    assert e.wer == pytest.approx(0.75)
    # insertions can push WER above 1
    assert word_errors("a", "x y z").wer == pytest.approx(3.0)
    # empty hypothesis: everything deleted
    e = word_errors("one two", "")
    assert (e.dele, e.wer, e.end_deletions, e.cer) == (2, 1.0, 2, 1.0)
    # deletion in the middle is not an end deletion
    assert word_errors("a b c", "a c").end_deletions == 0
    assert word_errors("a b c", "a b c").wer == 0.0


def test_normalizer_on_both_sides():
    assert normalize("Hello, World!") == "hello world"
    assert normalize("Mr. Smith") == normalize("mister smith")
    assert normalize("colour") == normalize("color")
    assert normalize("twenty-five dollars") == normalize("$25")
    assert normalize("...") == ""
    # punctuation becomes a space, it does not glue words together
    assert normalize("well...then") == "well then"


def test_corpus_vs_mean_wer():
    # corpus WER weighs by reference words: (1 + 0) / (1 + 9) = 0.1; the mean is (1 + 0)/2 = 0.5
    errs = [word_errors("hello", "yellow"), word_errors("a b c d e f g h i", "a b c d e f g h i")]
    corpus = sum(e.errors for e in errs) / sum(e.n_ref for e in errs)
    assert corpus == pytest.approx(0.1)
    assert np.mean([e.wer for e in errs]) == pytest.approx(0.5)
    iv = ratio_ci([e.errors for e in errs], [e.n_ref for e in errs])
    assert iv.value == pytest.approx(0.1)


def test_length_figures():
    assert expected_speech_s(5) == pytest.approx(2.7)
    f = length_figures(words=5, frames=20, duration_s=1.0, stop_fired=True, end_deletions=0)
    assert f["duration_ratio"] == pytest.approx(1 / 2.7)
    assert f["truncated"] and not f["overlong"] and f["premature_stop"]
    assert f["frames_per_word"] == pytest.approx(4.0)
    f = length_figures(words=5, frames=200, duration_s=6.0, stop_fired=False, end_deletions=3)
    assert f["overlong"] and not f["premature_stop"]  # the stop head never fired: not premature
    f = length_figures(words=5, frames=60, duration_s=2.7, stop_fired=True, end_deletions=2)
    assert f["premature_stop"] and not f["truncated"]  # the end of the text was not spoken


def test_bootstrap_deterministic_and_sane():
    rng = np.random.default_rng(0)
    errs, refs = rng.integers(0, 4, 100), rng.integers(3, 12, 100)
    a, b = ratio_ci(errs, refs, seed=7), ratio_ci(errs, refs, seed=7)
    assert a == b
    c = ratio_ci(errs, refs, seed=8)
    assert (c.low, c.high) != (a.low, a.high)
    assert a.low < a.value < a.high
    assert a.value == pytest.approx(errs.sum() / refs.sum())
    # a constant sample has a zero-width interval
    k = mean_ci(np.ones(30))
    assert (k.low, k.value, k.high) == (1.0, 1.0, 1.0)
    # 50/50 coin over 400 draws: the 95% CI is about +-0.05
    m = mean_ci(np.r_[np.zeros(200), np.ones(200)], replicates=2000, seed=1)
    assert 0.04 < m.high - 0.5 < 0.06 and 0.04 < 0.5 - m.low < 0.06


def test_paired_bootstrap():
    errs_a, refs = np.array([1, 0, 2, 1, 0] * 20), np.array([5] * 100)
    same = paired_ratio_diff_ci(errs_a, refs, errs_a, refs)
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0)
    worse = paired_ratio_diff_ci(errs_a, refs, errs_a + 1, refs)
    assert worse.value == pytest.approx(0.2) and worse.low == pytest.approx(0.2)
    d = paired_mean_diff_ci([0, 0, 1, 1], [1, 1, 1, 1])
    assert d.value == pytest.approx(0.5)
    with pytest.raises(ValueError):
        paired_mean_diff_ci([0, 1], [1])


def test_seeds_depend_on_base_and_id_only():
    assert utterance_seed(1, "a") == utterance_seed(1, "a")
    assert utterance_seed(1, "a") != utterance_seed(2, "a")
    assert utterance_seed(1, "a") != utterance_seed(1, "b")
    assert 0 <= utterance_seed(99, "x") < 2**63


def test_builtin_sets():
    core = load_set("core")
    assert len(core) >= 200
    cats = {u.category for u in core}
    assert len(cats) == 10
    assert all(1 <= u.words <= 3 for u in core if u.category == "short_1_3_words")
    assert all(30 <= u.words <= 60 for u in core if u.category == "long_30_60_words")
    assert len({u.id for u in core}) == len(core)
    assert 5 <= len(load_set("smoke")) <= 8


def test_user_sets_and_bad_input(tmp_path):
    txt = tmp_path / "mine.txt"
    txt.write_text("# comment\nFirst sentence.\n\nSecond one.\n")
    items = load_set(str(txt))
    assert [u.text for u in items] == ["First sentence.", "Second one."]
    assert items[0].category == "uncategorized" and items[0].id != items[1].id
    js = tmp_path / "mine.jsonl"
    js.write_text(json.dumps({"id": "x1", "text": "Hi there.", "category": "greet"}) + "\n")
    assert load_set(str(js))[0].id == "x1"
    with pytest.raises(SetError, match="not found"):
        load_set(str(tmp_path / "missing.jsonl"))
    (tmp_path / "empty.txt").write_text("\n# nothing\n")
    with pytest.raises(SetError, match="empty"):
        load_set(str(tmp_path / "empty.txt"))
    (tmp_path / "dup.jsonl").write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(SetError, match="duplicate"):
        load_set(str(tmp_path / "dup.jsonl"))
    (tmp_path / "bad.jsonl").write_text('{"id": "a", "text": "x"}\n{oops\n')
    with pytest.raises(SetError, match=":2"):
        load_set(str(tmp_path / "bad.jsonl"))
    (tmp_path / "blank.jsonl").write_text('{"id": "a", "text": "   "}\n')
    with pytest.raises(SetError, match="empty text"):
        load_set(str(tmp_path / "blank.jsonl"))


def test_jsonl_torn_last_line_is_dropped(tmp_path):
    p = tmp_path / "rows.jsonl"
    append_jsonl(p, {"id": "a"})
    append_jsonl(p, {"id": "b"})
    with open(p, "ab") as f:
        f.write(b'{"id": "c", "tr')  # a kill mid-write
    assert [r["id"] for r in read_jsonl(p, repair=True)] == ["a", "b"]
    append_jsonl(p, {"id": "c"})
    assert [r["id"] for r in read_jsonl(p)] == ["a", "b", "c"]
