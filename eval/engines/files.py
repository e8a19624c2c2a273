"""`--engine files`: score audio that already exists, matched to the set's utterance ids.

Another system's outputs (a vLLM-Omni run's dumps, another TTS, an older checkpoint's WAVs) then
get the same table, failure table, comparison and listening test as a run made here. The source
(`--files`, stored as the run's model) is either

- a folder holding `<id>.wav` (or .flac, .ogg, .mp3) per utterance id (with --seeds K the ids are
  `<sentence>#<k>`; `<sentence>` alone is taken for sample 0), or
- a manifest, JSONL (`{"id": ..., "path": ...}` a line) or CSV (columns id, path), paths relative
  to the manifest.

Each utterance's row holds the file's audio (mono, its own rate: ASR resamples) and the seed the
run assigned it, so it pairs with a Gepard run of the same set and base seed; frames, the stop
head and timings are unknown and stay empty. An id the source lacks fails the run with every
missing id named (exit 2), before any row is written.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import soundfile as sf

from eval.engines.base import EngineError, EvalEngine, Synthesis
from eval.engines.request import SynthesisItem
from gepard_demo.settings import SamplingSettings, StreamSettings

if TYPE_CHECKING:
    from eval.engines.base import SpeechEngine

AUDIO = (".wav", ".flac", ".ogg", ".mp3")


class AudioFiles(EvalEngine):
    name = "files"

    def __init__(self, source: str | Path):
        self.source = Path(source)
        if self.source.is_dir():
            self.paths = {p.stem: p for p in sorted(self.source.iterdir()) if p.suffix.lower() in AUDIO}
        elif self.source.is_file():
            self.paths = _manifest(self.source)
        else:
            raise EngineError(f"--files {self.source}: no such folder or manifest")
        if not self.paths:
            raise EngineError(f"--files {self.source}: no audio files ({', '.join(AUDIO)}) found")

    def describe(self) -> dict:
        return {"engine": self.name, "model": f"files:{self.source.name}", "source": str(self.source),
                "files": len(self.paths), "random_weights": None}

    def path_for(self, uid: str) -> Path | None:
        return self.paths.get(uid) or (self.paths.get(uid.split("#")[0]) if uid.endswith("#0") else None)

    def check(self, ids: list[str]) -> None:
        missing = [i for i in ids if self.path_for(i) is None]
        if missing:
            # Every id, however many: the user fixes the source from this list (the README promises it).
            raise EngineError(f"--files {self.source} has no audio for {len(missing)} of the set's {len(ids)} "
                              f"utterances: {', '.join(missing)}")

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings,
                   stream: StreamSettings) -> list[Synthesis]:
        return [s for _, s in self.synthesize_each(items, sampling, stream)]

    def synthesize_each(self, items: list[SynthesisItem], sampling: SamplingSettings, stream: StreamSettings,
                        batch_size: int = 4) -> Iterator[tuple[int, Synthesis]]:
        """Each utterance's file, looked up by its item's `uid`: every id checked before the first is
        read. An item's `ref` is not spoken here (the audio exists): the run keeps it for speaker similarity."""
        ids = [item.uid for item in items]
        if None in ids:
            raise EngineError("SynthesisItem.uid: --engine files reads audio by utterance id; a run hands it the "
                              "set's ids")
        self.check([uid for uid in ids if uid is not None])
        for i, item in enumerate(items):
            path = self.path_for(item.uid or "")
            assert path is not None  # check() named every id without a file
            yield i, self._one(path, item.seed)

    def _one(self, path: Path, seed: int) -> Synthesis:
        try:
            audio, rate = sf.read(str(path), dtype="float32", always_2d=True)
        except (RuntimeError, sf.LibsndfileError) as exc:
            raise EngineError(f"{path}: not readable audio ({exc})") from None
        mono = np.ascontiguousarray(audio.mean(axis=1), dtype=np.float32)
        return Synthesis(audio=mono, sample_rate=int(rate), frames=None, stop_frame=None,
                         p_stop=None, seed=seed, gen_s=0.0, decode_s=0.0, ttfa_s=0.0)


def _manifest(path: Path) -> dict[str, Path]:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
    else:
        try:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise EngineError(f"--files {path}: not JSONL ({exc.msg}); a manifest is JSONL or CSV with id, path") from None
    out = {}
    for k, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not row.get("id") or not row.get("path"):
            raise EngineError(f"--files {path}: row {k} needs an id and a path")
        p = Path(row["path"])
        out[str(row["id"])] = p if p.is_absolute() else (path.parent / p)
    return out


if TYPE_CHECKING:
    _AudioFiles_is_a_SpeechEngine: type[SpeechEngine] = AudioFiles
