"""Every eval engine takes the same SynthesisItem (eval/engines/request.py) whole: bad fields are
refused naming the field, an engine that cannot honour a field refuses it naming it, and the
files engine and the Eval tab's locked engine hand each item's id and voice through."""

from __future__ import annotations


import numpy as np
import pytest
import soundfile as sf

from eval.engines.base import EngineError
from eval.engines.files import AudioFiles
from eval.engines.request import SynthesisItem, VoiceRef, refs_of
from eval.ui.common import LockedEngine
from gepard_demo.settings import SamplingSettings, StreamSettings
from gepard_demo.ui.jobs.turns import FairLock


@pytest.mark.parametrize("fields, field", [
    ({"text": b"bytes", "seed": 1}, "SynthesisItem.text"),
    ({"text": "Hi.", "seed": "1"}, "SynthesisItem.seed"),
    ({"text": "Hi.", "seed": True}, "SynthesisItem.seed"),
    ({"text": "Hi.", "seed": 1, "ref": 3}, "SynthesisItem.ref"),
    ({"text": "Hi.", "seed": 1, "ref": ""}, "SynthesisItem.ref"),
])
def test_a_bad_item_is_refused_naming_its_field(fields, field):
    with pytest.raises((TypeError, ValueError), match=field):
        SynthesisItem(**fields)


def test_refs_are_none_for_a_batch_in_the_default_voice():
    plain = [SynthesisItem("a", 1), SynthesisItem("b", 2)]
    assert refs_of(plain) is None
    voiced = [SynthesisItem("a", 1), SynthesisItem("b", 2, VoiceRef("joe", None))]
    assert refs_of(voiced) == [None, VoiceRef("joe", None)]


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(3)
    for uid, n in (("one", 2205), ("two", 4410)):
        sf.write(tmp_path / f"{uid}.wav", (0.1 * rng.standard_normal(n)).astype(np.float32), 22050, subtype="PCM_16")
    return tmp_path


def test_files_reads_each_item_by_its_uid_and_keeps_its_voice(folder, tmp_path):
    engine = AudioFiles(folder)
    items = [SynthesisItem("Second.", 7, str(tmp_path / "ref.wav"), "two"), SynthesisItem("First.", 5, uid="one")]
    got = dict(engine.synthesize_each(items, SamplingSettings(), StreamSettings()))
    assert [len(got[i].audio) for i in (0, 1)] == [4410, 2205]  # by id, not by position
    assert [got[i].seed for i in (0, 1)] == [7, 5]
    assert [len(s.audio) for s in engine.synthesize(items, SamplingSettings(), StreamSettings())] == [4410, 2205]


def test_files_refuses_an_item_without_an_id_naming_the_field(folder):
    with pytest.raises(EngineError, match="SynthesisItem.uid"):
        list(AudioFiles(folder).synthesize_each([SynthesisItem("No id.", 1)], SamplingSettings(), StreamSettings()))


def test_the_locked_engine_passes_items_whole_and_holds_the_lock(folder):
    lock = FairLock()
    seen = []

    class Watching(AudioFiles):
        def synthesize(self, items, sampling, stream):
            seen.append((list(items), lock.locked()))
            return super().synthesize(items, sampling, stream)

    items = [SynthesisItem("First.", 5, VoiceRef("joe", None), "one")]
    out = LockedEngine(Watching(folder), lock).synthesize(items, SamplingSettings(), StreamSettings())
    assert len(out[0].audio) == 2205
    assert seen == [(items, True)] and not lock.locked()
    # Batch by batch, as a run calls it (the base's synthesize_each): the ids and voices arrive.
    two = items + [SynthesisItem("Second.", 7, uid="two")]
    done = dict(LockedEngine(Watching(folder), lock).synthesize_each(two, SamplingSettings(), StreamSettings(), 1))
    assert sorted(done) == [0, 1] and [b for b, _ in seen[1:]] == [[two[0]], [two[1]]]


@pytest.mark.slow
def test_piper_refuses_an_item_with_a_voice_naming_the_field():
    from eval.engines.piper import PiperReference

    piper = PiperReference.load()
    items = [SynthesisItem("Plain.", 0), SynthesisItem("Cloned.", 0, "ref.wav", "u2")]
    with pytest.raises(EngineError, match=r"SynthesisItem\.ref: --engine piper .*'u2'"):
        piper.synthesize(items, None, StreamSettings())
    assert len(piper.synthesize(items[:1], None, StreamSettings(fade_ms=0, silence_ms=0))[0].audio) > 0
