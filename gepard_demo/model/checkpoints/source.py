"""Resolve `--model` / `GEPARD_MODEL`: a local directory, a Hugging Face repo id, or `tiny`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODEL = "nineninesix/gepard-1.0"
TINY = "tiny"
# What a Gepard checkpoint needs at inference; the rest of a hub repo (cards, media) is skipped.
CHECKPOINT_FILES = ["*.json", "*.safetensors", "*.nemo", "tokenizer*", "*.txt", "*.model", "*.tiktoken", "merges*", "vocab*"]


class ModelNotFoundError(RuntimeError):
    """The model could not be found or downloaded; the message says how to fix it."""


@dataclass(frozen=True)
class ResolvedModel:
    name: str
    path: Path
    revision: str | None
    random_weights: bool


def default_cache_dir() -> Path:
    return Path.home() / ".cache" / "gepard-demo"


def resolve_model(spec: str, cache_dir: str | Path | None = None) -> ResolvedModel:
    spec = (spec or "").strip()
    if not spec:
        raise ModelNotFoundError("no model given: pass a local directory, a Hugging Face id, or 'tiny'")
    if spec == TINY:
        from gepard_demo.model.checkpoints.tiny import ensure_tiny

        path = ensure_tiny(Path(cache_dir) if cache_dir else default_cache_dir())
        return _local(spec, path)
    local = Path(spec).expanduser()
    if local.is_dir():
        return _local(spec, local.resolve())
    if local.exists() or spec.startswith((".", "/", "~")) or spec.count("/") != 1:
        raise ModelNotFoundError(
            f"model {spec!r} is neither a checkpoint directory nor a Hugging Face id (owner/name), nor 'tiny'"
        )
    return _download(spec)


def _local(name: str, path: Path) -> ResolvedModel:
    for required in ("config.json", "gepard_config.json"):
        if not (path / required).exists():
            raise ModelNotFoundError(f"{path} is not a Gepard checkpoint: {required} is missing")
    return ResolvedModel(name=name, path=path, revision=None, random_weights=_is_random(path))


def _is_random(path: Path) -> bool:
    # Written by `make-tiny`; a published checkpoint has no such key.
    return bool(json.loads((path / "gepard_config.json").read_text()).get("random_weights", False))


def _download(repo_id: str) -> ResolvedModel:
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(repo_id, allow_patterns=CHECKPOINT_FILES, etag_timeout=5))
    except Exception as exc:  # offline, gated, missing: all end the same way for the user
        raise ModelNotFoundError(
            f"could not get {repo_id!r} from the Hugging Face Hub ({type(exc).__name__}: {exc}). "
            f"On a machine with internet run `hf download {repo_id} --local-dir DIR`, then point "
            f"--model or GEPARD_MODEL at DIR (or use --model tiny for the random-weight test model)."
        ) from exc
    revision = path.name if path.parent.name == "snapshots" else None
    resolved = _local(repo_id, path)
    return ResolvedModel(name=repo_id, path=path, revision=revision, random_weights=resolved.random_weights)
