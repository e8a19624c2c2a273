"""Reading and writing `.nemo` archives without importing NeMo.

A `.nemo` is a tar (plain or gzipped) holding `model_config.yaml` and `model_weights.ckpt`
(a `torch.save`d flat state dict). NeMo writes its members as `./name`, so members are
matched by base name. Weights are read with `weights_only=True`: a checkpoint from the hub is
data and must never be able to run code on load.
"""

from __future__ import annotations

import io
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from .errors import CodecLoadError

CONFIG_NAME = "model_config.yaml"
WEIGHTS_NAME = "model_weights.ckpt"


@dataclass
class NemoArchive:
    path: Path
    config: dict[str, Any]
    state_dict: dict[str, torch.Tensor]


def _member(tar: tarfile.TarFile, name: str, path: Path) -> tarfile.TarInfo:
    found = [m for m in tar.getmembers() if m.isfile() and Path(m.name).name == name]
    if not found:
        names = ", ".join(m.name for m in tar.getmembers()[:20])
        raise CodecLoadError(f"{path}: no {name} inside the .nemo archive (members: {names})")
    # Nested archives (a model with sub-models) carry several; the shallowest is the model's own.
    return min(found, key=lambda m: m.name.count("/"))


def _read(tar: tarfile.TarFile, name: str, path: Path) -> bytes:
    file = tar.extractfile(_member(tar, name, path))
    if file is None:  # _member keeps regular files only, which always open
        raise CodecLoadError(f"{path}: {name} inside the .nemo archive cannot be read")
    return file.read()


def _open(path: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(path, "r:*")
    except (tarfile.TarError, OSError) as e:
        raise CodecLoadError(f"{path}: not a readable .nemo (tar) archive: {e}") from e


def read_config(path: Path) -> dict[str, Any]:
    """Only the config: cheap, for callers that need the topology before the weights."""
    path = Path(path)
    with _open(path) as tar:
        raw = _read(tar, CONFIG_NAME, path)
    config = yaml.safe_load(raw)
    if not isinstance(config, dict):
        raise CodecLoadError(f"{path}: {CONFIG_NAME} is not a mapping")
    return config


def read_nemo(path: Path, *, prefixes: tuple[str, ...] | None = None) -> NemoArchive:
    """Config and weights; `prefixes` keeps only matching keys (drops discriminators early)."""
    path = Path(path)
    with _open(path) as tar:
        config = yaml.safe_load(_read(tar, CONFIG_NAME, path))
        # torch.load needs a seekable file; a gzipped member is not cheaply seekable.
        buf = io.BytesIO(_read(tar, WEIGHTS_NAME, path))
    if not isinstance(config, dict):
        raise CodecLoadError(f"{path}: {CONFIG_NAME} is not a mapping")
    try:
        state = torch.load(buf, map_location="cpu", weights_only=True)
    except Exception as e:  # a pickle that wants code, or a truncated file
        raise CodecLoadError(f"{path}: {WEIGHTS_NAME} is not a plain tensor checkpoint: {e}") from e
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]  # a Lightning-style wrapper
    if not isinstance(state, dict):
        raise CodecLoadError(f"{path}: {WEIGHTS_NAME} holds {type(state).__name__}, not a state dict")
    if prefixes is not None:
        state = {k: v for k, v in state.items() if k.startswith(prefixes)}
    return NemoArchive(path=path, config=config, state_dict=state)


def write_nemo(path: Path, config: dict[str, Any], state_dict: dict[str, torch.Tensor]) -> Path:
    """Write an uncompressed `.nemo` laid out the way NeMo's save_to lays it out."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    cfg_bytes = yaml.safe_dump(config, sort_keys=False).encode()
    wbuf = io.BytesIO()
    torch.save({k: v.detach().contiguous().cpu() for k, v in state_dict.items()}, wbuf)
    tmp = path.with_name(path.name + ".partial")
    with tarfile.open(tmp, "w") as tar:
        for name, data in ((CONFIG_NAME, cfg_bytes), (WEIGHTS_NAME, wbuf.getvalue())):
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(path)  # a reader never sees a half-written archive
    return path
