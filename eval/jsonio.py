"""Crash-safe files: whole files via tmp + os.replace, JSONL rows appended one line a write.

A process killed mid-append can leave a torn last line; `read_jsonl(..., repair=True)`
drops it (truncating the file back to the last complete row) so resuming never reads half
a row and never duplicates one.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_json_atomic(path: str | Path, obj) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=False, default=str)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def replace_atomic(path: str | Path, write) -> None:
    """Call write(tmp_path) for a temp file beside path, then rename it over path."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=path.suffix + ".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def append_line(path: str | Path, data: bytes) -> None:
    """One os.write on an O_APPEND descriptor, fsynced before returning: a killed run loses at
    most the line it was writing (readers drop a torn last line)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def append_jsonl(path: str | Path, row: dict) -> None:
    """One row as one fsynced append (append_line)."""
    append_line(path, (json.dumps(row, default=str) + "\n").encode("utf-8"))


def read_jsonl(path: str | Path, repair: bool = False) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    rows, good_end, pos = [], 0, 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            break  # torn last line: no newline
        line = data[pos:nl]
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                if nl + 1 < len(data):
                    raise ValueError(f"{path}: corrupt row at byte {pos} (not the last line)") from None
                break
        pos = good_end = nl + 1
    if good_end < len(data) and repair:
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return rows
