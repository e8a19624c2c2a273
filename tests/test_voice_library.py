"""The voice library's folder (gepard_demo/voice/library.py): the wheel's rules for names, the cap,
the registration policy and built-in names; voices that survive a restart; an upload killed midway
in a real second process that leaves nothing behind; two processes uploading one name at once
that end as one voice; a voice deleted while a request holds it."""

from __future__ import annotations

import multiprocessing
import os
import signal

import numpy as np
import pytest
import torch

from gepard_demo.voice import library as library_module
from gepard_demo.voice.library import MAX_NAME_CHARS, VoiceError, VoiceLibrary


def _prefix(seed: int = 0) -> torch.Tensor:
    return torch.randn(8, 16, generator=torch.Generator().manual_seed(seed))


def _clip(seconds: float = 3.5) -> np.ndarray:
    return (0.1 * np.sin(np.arange(int(22050 * seconds)) / 10)).astype(np.float32)


def _add(lib: VoiceLibrary, name: str, seed: int = 0, **kw):
    return lib.add(name, kw.pop("consent", "consent-1"), _prefix(seed), _clip(), 3.5, **kw)


def _files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name != ".lock")


def test_a_saved_voice_is_listed_as_the_wheel_lists_it_and_keeps_its_prefix(tmp_path):
    lib = VoiceLibrary(tmp_path)
    saved = _add(lib, "Alice", ref_text="Hello there.", speaker_description="calm", file_size=1234)
    (entry,) = [v.listing() for v in lib.voices()]
    assert entry == {"name": "Alice", "consent": "consent-1", "created_at": saved.created_at, "file_size": 1234,
                     "mime_type": "audio/wav", "embedding_source": "audio", "embedding_dim": 16, "clip_s": 3.5,
                     "ref_text": "Hello there.", "speaker_description": "calm"}
    assert torch.equal(lib.prefix("alice"), _prefix(0))  # names are case-insensitive
    assert np.array_equal(lib.clip("ALICE"), _clip())
    assert _files(tmp_path) == [f"Alice_consent-1_{saved.created_at}.safetensors"]


@pytest.mark.parametrize("name", ["", "   ", "a/b", "a\\b", "..", ".", "a\x00b", "bell\x07", "x" * (MAX_NAME_CHARS + 1)])
def test_bad_names_are_refused_naming_the_field_and_nothing_is_stored(tmp_path, name):
    lib = VoiceLibrary(tmp_path)
    with pytest.raises(VoiceError) as err:
        _add(lib, name)
    assert err.value.field == "name" and _files(tmp_path) == []


def test_consent_is_required(tmp_path):
    lib = VoiceLibrary(tmp_path)
    with pytest.raises(VoiceError, match="consent is required") as err:
        _add(lib, "Bob", consent="  ")
    assert err.value.field == "consent" and _files(tmp_path) == []


def test_overwrite_replaces_and_immutable_refuses(tmp_path):
    lib = VoiceLibrary(tmp_path)
    _add(lib, "Carol", seed=1)
    _add(lib, "CAROL", seed=2)
    assert [v.name for v in lib.voices()] == ["CAROL"] and len(_files(tmp_path)) == 1
    assert torch.equal(lib.prefix("carol"), _prefix(2))
    frozen = VoiceLibrary(tmp_path, policy="immutable")
    with pytest.raises(VoiceError, match="'immutable'; delete it first via DELETE /v1/audio/voices/carol"):
        _add(frozen, "carol", seed=3)
    assert torch.equal(frozen.prefix("Carol"), _prefix(2))


def test_the_cap_and_the_built_in_names(tmp_path):
    lib = VoiceLibrary(tmp_path, max_voices=2, reserved=("Vivian",))
    _add(lib, "one")
    _add(lib, "two")
    with pytest.raises(VoiceError, match=r"Uploaded voice limit reached \(2\)"):
        _add(lib, "three")
    _add(lib, "two", seed=5)  # replacing one is not a new one
    with pytest.raises(VoiceError, match="reserved by a built-in speaker"):
        _add(VoiceLibrary(tmp_path / "b", reserved=("Vivian",)), "vivian")
    assert [v.name for v in lib.voices()] == ["one", "two"]


def test_voices_survive_a_restart_and_an_unknown_one_names_the_route(tmp_path):
    _add(VoiceLibrary(tmp_path), "Dora", seed=4)
    again = VoiceLibrary(tmp_path)
    assert [v.name for v in again.voices()] == ["Dora"] and torch.equal(again.prefix("dora"), _prefix(4))
    with pytest.raises(VoiceError, match="Unknown voice 'Eve': upload it first with POST /v1/audio/voices") as err:
        again.prefix("Eve")
    assert err.value.field == "voice"


def test_a_voice_deleted_while_a_request_holds_it(tmp_path):
    lib = VoiceLibrary(tmp_path)
    _add(lib, "Fay", seed=6)
    held = lib.prefix("Fay")  # what a request takes when it starts
    assert lib.delete("fay") and not lib.delete("fay")
    assert torch.equal(held, _prefix(6)) and lib.voices() == [] and _files(tmp_path) == []


def _killed_midway(folder: str) -> None:
    """A child that dies (SIGKILL) halfway through writing its voice's file."""
    real = library_module.save_file

    def half(tensors, path, metadata=None):
        real(tensors, path, metadata=metadata)
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) // 2)
        os.kill(os.getpid(), signal.SIGKILL)

    library_module.save_file = half
    _add(VoiceLibrary(folder), "Gil")


def test_an_upload_killed_midway_leaves_no_half_voice(tmp_path):
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_killed_midway, args=(str(tmp_path),))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert any(name.startswith(".partial-") for name in _files(tmp_path))  # it really died mid-write
    lib = VoiceLibrary(tmp_path)
    assert lib.voices() == [] and _files(tmp_path) == []  # no voice, and the half file is gone


def _upload(folder: str, seed: int, barrier) -> None:
    barrier.wait(30)
    _add(VoiceLibrary(folder), "Hal", seed=seed)


def test_two_processes_uploading_one_name_at_once_end_as_one_voice(tmp_path):
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(2)
    kids = [ctx.Process(target=_upload, args=(str(tmp_path), seed, barrier)) for seed in (7, 8)]
    for k in kids:
        k.start()
    for k in kids:
        k.join(60)
    assert [k.exitcode for k in kids] == [0, 0]
    lib = VoiceLibrary(tmp_path)
    (voice,) = lib.voices()
    assert voice.name == "Hal" and len(_files(tmp_path)) == 1
    assert any(torch.equal(lib.prefix("hal"), _prefix(s)) for s in (7, 8))
