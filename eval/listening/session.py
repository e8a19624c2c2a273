"""A blind listening test between runs: pairs of the same sentence and seed, A or B or "same".

A session is a folder (`<runs>/listening/<name>/`): `session.json` says which runs it compares and
lists its pairs, `votes.jsonl` holds every answer as it is given (one line a vote, appended: a
page reloaded or a listener back tomorrow goes on where they were). Each pair is the same
utterance id (sentence and seed) in two runs; which run plays as A is decided per pair by a
seeded draw keyed by the session seed, the id and the two runs (as EmergentTTS-Eval randomises
A/B per sample), so the same session always asks the same way and a listener cannot learn "A is
the new model". With more than two runs every pair of runs is asked for every id. The order of
the pairs is shuffled by the same seed.
"""

from __future__ import annotations

import itertools
import json
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

from eval.jsonio import append_jsonl, read_jsonl, write_json_atomic
from eval.runs.run import RunError, done_rows

CHOICES = ("A", "B", "same")


class ListeningError(RunError):
    """A session that cannot be made or answered (a bad name, runs without common utterances...)."""


@dataclass(frozen=True)
class Pair:
    index: int
    id: str
    text: str
    a: dict  # {"run": name, "wav": path}
    b: dict

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _rows(run: Path) -> dict[str, dict]:
    return {r["id"]: r for r in done_rows(run) if r.get("wav")}


def make_pairs(runs_dir: Path, runs: list[str], seed: int) -> list[Pair]:
    """Every pair for the runs (names relative to runs_dir, as the pairs keep them)."""
    rows = {run: _rows(runs_dir / run) for run in runs}
    common = sorted(set.intersection(*(set(r) for r in rows.values())))
    if not common:
        raise ListeningError("these runs have no utterance in common to compare")
    pairs = []
    for uid in common:
        for x, y in itertools.combinations(runs, 2):
            rx, ry = rows[x][uid], rows[y][uid]
            seeds = rx.get("seed"), ry.get("seed")
            if rx["text"] != ry["text"] or None not in seeds and seeds[0] != seeds[1]:
                continue  # not the same sentence and seed (an engine without seeds, Piper, pairs with any)
            first, second = (x, y) if random.Random(f"{seed}|{uid}|{x}|{y}").random() < 0.5 else (y, x)
            pairs.append((uid, rx["text"], {"run": first, "wav": str(runs_dir / first / rows[first][uid]["wav"])},
                          {"run": second, "wav": str(runs_dir / second / rows[second][uid]["wav"])}))
    if not pairs:
        raise ListeningError("no utterance has the same text and seed in these runs")
    random.Random(seed).shuffle(pairs)
    return [Pair(i, *p) for i, p in enumerate(pairs)]


class Session:
    def __init__(self, folder: Path):
        self.folder = Path(folder)
        meta = json.loads((self.folder / "session.json").read_text())
        self.runs, self.seed = meta["runs"], meta["seed"]
        self.pairs = [Pair(**p) for p in meta["pairs"]]

    @classmethod
    def open(cls, runs_dir: str | Path, name: str, runs: list[str] | None = None, seed: int = 0) -> "Session":
        """The session `name` under runs_dir/listening, made from `runs` (folder names in runs_dir)
        the first time; opened again as it is after that (its runs must be the same)."""
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name or "") or name.startswith("."):
            raise ListeningError(f"session name {name!r}: use letters, digits, '.', '_' or '-'")
        folder = Path(runs_dir) / "listening" / name
        if (folder / "session.json").is_file():
            s = cls(folder)
            if runs and sorted(runs) != sorted(s.runs):
                raise ListeningError(f"session {name!r} compares {', '.join(s.runs)}, not {', '.join(runs)}: "
                                     "pick another name for another comparison")
            return s
        if not runs or len(set(runs)) < 2:
            raise ListeningError("a listening test needs at least two runs")
        for r in runs:
            if not (Path(runs_dir) / r / "rows.jsonl").is_file():
                raise ListeningError(f"{r!r} is not a run in {runs_dir} (no rows.jsonl)")
        pairs = make_pairs(Path(runs_dir), list(runs), seed)
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(folder / "session.json", {"runs": list(runs), "seed": seed, "pairs": [p.as_dict() for p in pairs],
                                                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        return cls(folder)

    def votes(self) -> list[dict]:
        return read_jsonl(self.folder / "votes.jsonl", repair=True)

    def next_pair(self, who: str) -> Pair | None:
        """The first pair `who` has not answered (None: all done)."""
        answered = {v["pair"] for v in self.votes() if v["who"] == who}
        return next((p for p in self.pairs if p.index not in answered), None)

    def answer(self, who: str, pair: int, choice: str) -> dict:
        """Record `who`'s choice for pair `pair` ("A", "B" or "same"), once."""
        who = (who or "").strip()
        if not who:
            raise ListeningError("say who is listening (a name or initials): votes are kept per listener")
        if choice not in CHOICES:
            raise ListeningError(f"choice must be one of {', '.join(CHOICES)}, got {choice!r}")
        if not 0 <= pair < len(self.pairs):
            raise ListeningError(f"pair {pair} is not in this session (it has {len(self.pairs)})")
        if any(v["pair"] == pair and v["who"] == who for v in self.votes()):
            raise ListeningError(f"{who} already answered pair {pair}")
        p = self.pairs[pair]
        winner = {"A": p.a["run"], "B": p.b["run"], "same": None}[choice]
        vote = {"pair": pair, "id": p.id, "a": p.a["run"], "b": p.b["run"], "choice": choice, "winner": winner,
                "who": who, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        append_jsonl(self.folder / "votes.jsonl", vote)
        return vote

    def progress(self, who: str) -> tuple[int, int]:
        return len({v["pair"] for v in self.votes() if v["who"] == who}), len(self.pairs)


def write_report(session: Session) -> Path:
    """listening.md and listening.json in the session's folder, from its votes so far."""
    from eval.jsonio import write_bytes_atomic

    from .scores import markdown, summary

    s = summary(session.votes(), session.runs)
    write_json_atomic(session.folder / "listening.json", {"runs": session.runs, "pairs": len(session.pairs), **s})
    text = markdown(session.folder.name, session.runs, len(session.pairs), s)
    write_bytes_atomic(session.folder / "listening.md", text.encode("utf-8"))
    return session.folder / "listening.md"
