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


# -- issue 62: bounds, look-alike names, the folder's life, the listing's reads ------------------


def test_a_name_of_exactly_the_limit_is_kept(tmp_path):
    lib = VoiceLibrary(tmp_path)
    name = "N" * MAX_NAME_CHARS
    assert _add(lib, name).name == name and lib.find(name.lower()) is not None


@pytest.mark.parametrize("name", ["ＤＥＦＡＵＬＴ", "Default", " default "])
def test_a_look_alike_of_a_built_in_name_is_refused(tmp_path, name):
    lib = VoiceLibrary(tmp_path, reserved=("default",))
    with pytest.raises(VoiceError, match="reserved") as err:
        _add(lib, name)
    assert err.value.field == "name" and _files(tmp_path) == []


@pytest.mark.parametrize("name", ["de\u200bfault", "a\u0085b", "line\u2028sep", "para\u2029sep", "evil\u202eorder",
                                  "tab\there", "bom\ufeff"])
def test_format_and_separator_characters_are_refused(tmp_path, name):
    lib = VoiceLibrary(tmp_path)
    with pytest.raises(VoiceError, match="no control, format or separator") as err:
        _add(lib, name)
    assert err.value.field == "name" and _files(tmp_path) == []


def test_one_name_in_nfc_and_nfd_and_any_case_is_one_voice(tmp_path):
    import unicodedata

    lib = VoiceLibrary(tmp_path, policy="immutable")
    saved = _add(lib, unicodedata.normalize("NFC", "José"))
    for other in (unicodedata.normalize("NFD", "José"), "JOSÉ", " josé ", "Ｊｏｓé"):
        assert lib.find(other) == saved
        with pytest.raises(VoiceError, match="already exists"):
            _add(lib, other)
    assert [v.name for v in lib.voices()] == ["José"] and len(_files(tmp_path)) == 1


def test_names_are_trimmed_alike(tmp_path):
    lib = VoiceLibrary(tmp_path, reserved=("default",))
    assert _add(lib, "  Narrator \u3000").name == "Narrator"  # an ideographic space is a space after NFKC


def test_a_long_consent_is_refused_and_a_long_allowed_one_keeps_the_file_name_short(tmp_path):
    lib = VoiceLibrary(tmp_path)
    with pytest.raises(VoiceError, match="at most") as err:
        _add(lib, "Carol", consent="c" * (library_module.MAX_CONSENT_CHARS + 1))
    assert err.value.field == "consent" and _files(tmp_path) == []
    saved = _add(lib, "N" * MAX_NAME_CHARS, consent="c" * library_module.MAX_CONSENT_CHARS)
    assert saved.consent == "c" * library_module.MAX_CONSENT_CHARS  # kept whole in the header
    (name,) = _files(tmp_path)
    assert len(name) < 200 and name.count("c") <= 64


@pytest.mark.parametrize("field", ["ref_text", "speaker_description"])
def test_the_texts_kept_with_a_voice_are_bounded(tmp_path, field):
    lib = VoiceLibrary(tmp_path)
    with pytest.raises(VoiceError) as err:
        _add(lib, "Dora", **{field: "w" * (library_module.MAX_TEXT_CHARS + 1)})
    assert err.value.field == field and _files(tmp_path) == []


def test_a_disk_that_refuses_is_told_without_its_paths(tmp_path, monkeypatch):
    def full(tensors, path, metadata=None):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(library_module, "save_file", full)
    with pytest.raises(library_module.VoiceStoreError) as err:
        _add(VoiceLibrary(tmp_path), "Eve")
    assert "No space left" in str(err.value) and str(tmp_path) not in str(err.value)
    assert _files(tmp_path) == []


def test_opening_looking_and_refusing_make_no_folder(tmp_path):
    folder = tmp_path / "not-yet"
    lib = VoiceLibrary(folder, reserved=("default",))
    assert lib.voices() == [] and lib.find("x") is None and lib.delete("x") is False
    for name in ("default", "a/b", ""):
        with pytest.raises(VoiceError):
            _add(lib, name)
    assert not folder.exists()
    _add(lib, "First")
    assert folder.is_dir()


def test_the_listing_reads_the_headers_again_only_when_the_files_change(tmp_path, monkeypatch):
    lib = VoiceLibrary(tmp_path)
    for i in range(5):
        _add(lib, f"V{i}", seed=i)
    opened = []
    real = library_module.safe_open

    def counting(path, *args, **kwargs):
        opened.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(library_module, "safe_open", counting)
    lib.voices()
    opened.clear()
    for _ in range(10):
        assert lib.find("v3") is not None
    assert opened == []  # unchanged folder: no header read again
    other = VoiceLibrary(tmp_path)  # another process's upload, say
    _add(other, "Late", seed=9)
    assert lib.find("late") is not None and len(opened) >= 1
    other.delete("v0")
    assert lib.find("v0") is None and [v.name for v in lib.voices()] == ["V1", "V2", "V3", "V4", "Late"]
