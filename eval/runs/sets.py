"""Test sets: the built-in ones under eval/sets/ and user files.

A set file is either JSONL (one object a line with "text" and optional "id", "category") or
plain text (one sentence a line; blank lines and lines starting with '#' are skipped).
A JSONL row may carry "ref_audio": a reference recording to speak that sentence in (voice
cloning), a path relative to the set file.
Ids must be unique: they key the resumable run rows and the per-utterance seeds.
"""

from __future__ import annotations

import json
import dataclasses
from dataclasses import dataclass
from pathlib import Path

SETS_DIR = Path(__file__).resolve().parents[1] / "sets"  # eval/sets/: data beside the code that reads it


class SetError(ValueError):
    """A test set that cannot be used; the message says which file and line."""


@dataclass(frozen=True)
class Utterance:
    id: str
    text: str
    category: str
    ref_audio: str | None = None  # reference voice for this sentence (absolute path)
    sentence: str | None = None  # the set's id of the sentence this is a sample of (expand_samples)
    sample: int = 0  # which of the sentence's samples (0 with one sample per sentence)
    voice: str | None = None  # a saved voice it is spoken in (expand_voices)

    @property
    def words(self) -> int:
        """Whitespace-separated word count of the input text (used for expected duration)."""
        return len(self.text.split())

    @property
    def sentence_id(self) -> str:
        return self.sentence or self.id


def expand_samples(items: list[Utterance], k: int) -> list[Utterance]:
    """k samples of every sentence: sample 0 keeps the sentence's id (so it is the row a one-sample
    run makes, with the same seed), sample s > 0 is `<id>~s`."""
    if k == 1:
        return list(items)
    return [dataclasses.replace(u, id=u.id if s == 0 else f"{u.id}~{s}", sentence=u.id, sample=s)
            for u in items for s in range(k)]


def expand_voices(items: list[Utterance], voices: tuple[str, ...]) -> list[Utterance]:
    """Every utterance in every saved voice, each with its sentence's seed (so the voices are paired by
    sentence). One voice keeps the ids (a run in it pairs with a run in the default voice); several
    give `<id>@<voice>` (lower case: names are case-insensitive)."""
    if not voices:
        return list(items)
    if len(voices) == 1:
        return [dataclasses.replace(u, voice=voices[0], sentence=u.sentence_id) for u in items]
    return [dataclasses.replace(u, id=f"{u.id}@{v.lower()}", voice=v, sentence=u.sentence_id)
            for u in items for v in voices]


def builtin_sets() -> list[str]:
    return sorted(p.stem for p in SETS_DIR.glob("*.jsonl"))


def resolve_set_path(name_or_path: str) -> Path:
    """A built-in set name ("core", "short", "smoke") or a path to a .jsonl / .txt file."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    builtin = SETS_DIR / f"{name_or_path}.jsonl"
    if builtin.is_file():
        return builtin
    raise SetError(
        f"test set {name_or_path!r} not found: not a file, and not a built-in set "
        f"(built-in: {', '.join(builtin_sets())})"
    )


def load_set(name_or_path: str, limit: int | None = None, categories: list[str] | None = None) -> list[Utterance]:
    path = resolve_set_path(name_or_path)
    lines = path.read_text(encoding="utf-8").splitlines()
    jsonl = path.suffix == ".jsonl" or any(l.lstrip().startswith("{") for l in lines[:5] if l.strip())
    items: list[Utterance] = []
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or (not jsonl and line.startswith("#")):
            continue
        if jsonl:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise SetError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise SetError(f"{path}:{lineno}: a JSONL row needs a string field 'text'")
            text = obj["text"].strip()
            uid = str(obj.get("id", f"{path.stem}-{lineno:04d}"))
            cat = str(obj.get("category", "uncategorized"))
            ref = obj.get("ref_audio")
            if ref is not None:
                if not isinstance(ref, str) or not ref:
                    raise SetError(f"{path}:{lineno}: ref_audio must be a path to an audio file")
                ref_path = (path.parent / ref).resolve()
                if not ref_path.is_file():
                    raise SetError(f"{path}:{lineno}: ref_audio {ref!r} not found (looked for {ref_path})")
                ref = str(ref_path)
        else:
            text, uid, cat, ref = line, f"{path.stem}-{lineno:04d}", "uncategorized", None
        if not text:
            raise SetError(f"{path}:{lineno}: empty text (the model would voice arbitrary audio)")
        if "/" in uid or "\\" in uid or uid.startswith("."):
            raise SetError(f"{path}:{lineno}: id {uid!r} cannot be a file name")
        items.append(Utterance(uid, text, cat, ref))
    seen: set[str] = set()
    for u in items:
        if u.id in seen:
            raise SetError(f"{path}: duplicate id {u.id!r}")
        seen.add(u.id)
    if categories:
        items = [u for u in items if u.category in categories]
    if limit is not None:
        items = items[:limit]
    if not items:
        raise SetError(f"{path}: the test set is empty" + (" after filtering" if categories or limit is not None else ""))
    return items
