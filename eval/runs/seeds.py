"""Per-utterance seeds: a pure function of (base seed, utterance id).

So a resumed run, a run in another order or batch size, and a rerun draw each utterance's
noise from the same seed (the engine gives each request its own generator, facts §3). With K
samples per sentence (`--seeds K`), sample k of a sentence has the seed of (base seed, id, k).
"""

from __future__ import annotations

import hashlib

DEFAULT_BASE_SEED = 1234


def utterance_seed(base_seed: int, utt_id: str) -> int:
    digest = hashlib.sha256(f"{base_seed}:{utt_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & (2**63 - 1)


def sample_seed(base_seed: int, sentence_id: str, sample: int = 0) -> int:
    """Sample 0 of a sentence draws the seed a one-sample run draws; sample k > 0 its own."""
    return utterance_seed(base_seed, sentence_id if sample == 0 else f"{sentence_id}#{sample}")
