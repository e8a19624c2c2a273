"""Where a codec comes from: a local `.nemo` (or a folder holding one), or a Hugging Face repo id.

The hub is tried cache-first, so a codec downloaded once keeps working offline; anything that
still fails becomes a CodecLoadError that says how to point at a local file instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import CodecLoadError

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _single_nemo(folder: Path, what: str) -> Path:
    found = sorted(folder.rglob("*.nemo"))
    if len(found) == 1:
        return found[0]
    if not found:
        raise CodecLoadError(f"{what}: no .nemo file in {folder}")
    names = ", ".join(str(p.relative_to(folder)) for p in found)
    raise CodecLoadError(f"{what}: several .nemo files in {folder} ({names}); pass the one to use")


def _hint(repo_id: str) -> str:
    return (
        f"To use a local copy instead, download it where the hub is reachable "
        f"(`huggingface-cli download {repo_id}`) and pass the file's path, "
        f"e.g. load_codec('/path/to/{repo_id.split('/')[-1]}.nemo') or the app's codec path option."
    )


def _from_hub(repo_id: str, cache_dir: Path | None) -> Path:
    from huggingface_hub import HfApi, hf_hub_download, snapshot_download

    try:  # cache first: no network needed when it was downloaded before
        folder = snapshot_download(repo_id, allow_patterns=["*.nemo"], cache_dir=cache_dir, local_files_only=True)
        return _single_nemo(Path(folder), f"hub cache of {repo_id}")
    except Exception:
        pass  # not cached (or cached without its .nemo): ask the hub
    try:
        files = [f for f in HfApi().list_repo_files(repo_id) if f.endswith(".nemo")]
    except Exception as e:
        raise CodecLoadError(
            f"codec {repo_id!r} is not in the local Hugging Face cache and the hub could not be reached "
            f"({type(e).__name__}: {str(e)[:200]}). {_hint(repo_id)}"
        ) from e
    if len(files) != 1:
        raise CodecLoadError(
            f"hub repo {repo_id!r} holds {len(files)} .nemo files ({', '.join(files) or 'none'}); "
            f"expected exactly one. {_hint(repo_id)}"
        )
    try:
        return Path(hf_hub_download(repo_id, files[0], cache_dir=cache_dir))
    except Exception as e:
        raise CodecLoadError(f"downloading {repo_id}/{files[0]} failed ({type(e).__name__}: {e}). {_hint(repo_id)}") from e


def resolve_codec_source(source: str | Path, cache_dir: str | Path | None = None) -> Path:
    """A readable local `.nemo` path for `source`, or CodecLoadError."""
    text = str(source)
    path = Path(text).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        return _single_nemo(path, text)
    looks_local = text.endswith(".nemo") or text.startswith(("/", ".", "~")) or not _REPO_ID.match(text)
    if looks_local:
        raise CodecLoadError(f"codec file {text!r} does not exist (and it is not a Hugging Face repo id)")
    return _from_hub(text, Path(cache_dir) if cache_dir is not None else None)
