"""Batch synthesis into a run folder, resumable.

Run folder layout:
  config.json       what was asked (engine, model, set, sampling, stream, base seed, ...)
  set.jsonl         the utterances of this run, as loaded
  environment.json  one entry per (re)start: packages, machine, engine / model / revision
  rows.jsonl        one row per finished utterance (written after its WAV)
  errors.jsonl      one row per utterance refused before synthesis (text the app would refuse
                    too: empty, or above gepard_demo's 2000-character limit; or a text with no
                    word under the force stop's "auto"), the same rule for every engine
                    (eval/runs/checks.py); the run goes on without it
  wav/<id>.wav      16-bit PCM at the engine's sample rate
  status.json       done / total / complete

Resuming: the same command again (or `python -m eval run --out DIR` with no other flags
needed: the saved config is reused). Utterances with a row are skipped, a torn last row is
dropped, a WAV without a row is regenerated. Seeds depend only on (base seed, id), so the
result equals an uninterrupted run (up to batch-shape rounding, facts §3).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from pathlib import Path

from tqdm import tqdm

from eval.jsonio import append_jsonl, read_jsonl, write_bytes_atomic, write_json_atomic
from eval.runs.checks import input_error, text_repetition_error, voices_error
from eval.runs.environment import environment
from eval.runs.rows import row_settings, row_spoken, save_audio
from eval.runs.seeds import DEFAULT_BASE_SEED, sample_seed
from eval.engines.request import Reference, SynthesisItem, VoiceRef
from eval.runs.sets import SetError, Utterance, expand_samples, expand_voices, load_set, resolve_set_path
from gepard_demo.settings import SamplingSettings, StreamSettings

if TYPE_CHECKING:
    from eval.engines.base import SpeechEngine
    from gepard_demo.voice.similarity import SpeakerSimilarity

# Changing any of these between a run and its resume would mix two experiments in one folder.
IDENTITY_KEYS = ("engine", "model", "set_sha256", "sampling", "stream", "base_seed", "ref_audio", "seeds", "voices")


class RunError(RuntimeError):
    """A run folder that cannot be (re)used as asked; the message says why and what to do."""


@dataclass(frozen=True)
class RunConfig:
    engine: str = "local"
    model: str = "tiny"
    set: str = "smoke"
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    stream: StreamSettings = field(default_factory=StreamSettings)
    batch_size: int = 4
    base_seed: int = DEFAULT_BASE_SEED
    limit: int | None = None
    categories: tuple[str, ...] = ()
    device: str = "cpu"
    model_cache: str | None = None  # where `tiny` is built / hub models are cached (not part of the identity)
    # --engine server only. Not part of the identity: a resumed run may reach the same
    # served model at other addresses (the served model id is checked instead).
    server_urls: tuple[str, ...] = ()
    server_timeout: float = 60.0
    server_concurrency: int = 1  # requests in flight per server
    # A reference voice for every sentence (voice cloning); a set's per-sentence ref_audio wins.
    ref_audio: str | None = None
    seeds: int = 1  # samples per sentence (--seeds K): sample k has seed f(base seed, id, k)
    # Saved voices (gepard_demo/voice/library.py): every sentence in each (--voice, repeatable), paired by
    # seed. Where they are read here (not part of the identity): a local engine's prefixes, and every
    # engine's clips for speaker similarity; a server keeps its own.
    voices: tuple[str, ...] = ()
    voices_dir: str | None = None

    def __post_init__(self) -> None:
        self.validate()  # checked when made: no unchecked instance exists

    def validate(self) -> "RunConfig":
        if self.sampling.seed is not None:
            raise RunError("per-utterance seeds come from base_seed; leave SamplingSettings.seed unset")
        if not 1 <= self.seeds <= 64:
            raise RunError(f"seeds must be in [1, 64] samples per sentence, got {self.seeds}")
        if not 1 <= self.batch_size <= 256:
            raise RunError(f"batch_size must be in [1, 256], got {self.batch_size}")
        if not 0 <= self.base_seed < 2**63:
            raise RunError(f"base seed must be a non-negative 64-bit integer, got {self.base_seed}")
        if self.engine == "server" and not self.server_urls:
            raise RunError("--engine server needs --server-url http://HOST:PORT")
        if not 1 <= self.server_concurrency <= 64:
            raise RunError(f"concurrency must be in [1, 64] per server, got {self.server_concurrency}")
        if not self.sampling.text_repetition and self.engine not in ("local", "local-stream"):
            raise RunError(f"--text-repetition off needs an engine that builds Gepard's prompt here (local, "
                           f"local-stream): --engine {self.engine} cannot honour it")
        if self.ref_audio is not None and self.engine in ("piper", "files"):
            raise RunError(f"--engine {self.engine} cannot take --ref-audio (local, local-stream and server can)")
        if self.engine == "files" and not Path(self.model).exists():
            raise RunError(f"--engine files needs --files DIR_OR_MANIFEST (got {self.model!r}: not found)")
        if self.ref_audio is not None and not Path(self.ref_audio).is_file():
            raise RunError(f"--ref-audio {self.ref_audio} not found")
        why = voices_error(self.voices, self.voices_dir, self.engine, self.ref_audio)
        if why:
            raise RunError(why)
        if not self.server_timeout > 0:
            raise RunError(f"server timeout must be > 0 s, got {self.server_timeout}")
        return self

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["categories"] = list(self.categories)
        d["server_urls"] = list(self.server_urls)
        d["voices"] = list(self.voices)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "RunConfig":
        if d.get("server_url") and not d.get("server_urls"):  # a run folder from before the pools
            d = {**d, "server_urls": [d["server_url"]]}
        d = {k: v for k, v in d.items() if k in {f.name for f in dataclasses.fields(cls)}}
        d["sampling"] = SamplingSettings(**d["sampling"])
        d["stream"] = StreamSettings(**d["stream"])
        d["categories"] = tuple(d.get("categories") or ())
        d["server_urls"] = tuple(d.get("server_urls") or ())
        d["voices"] = tuple(d.get("voices") or ())
        return cls(**d)


def set_digest(items: list[Utterance]) -> str:
    h = hashlib.sha256()
    for u in items:
        fields = [u.id, u.text, u.category] + ([u.ref_audio] if u.ref_audio else [])
        h.update(json.dumps(fields).encode() + b"\n")
    return h.hexdigest()


def load_items(run_dir: Path) -> list[Utterance]:
    return [Utterance(r["id"], r["text"], r["category"], r.get("ref_audio")) for r in read_jsonl(run_dir / "set.jsonl")]


def saved_config(run_dir: str | Path) -> RunConfig | None:
    p = Path(run_dir) / "config.json"
    if not p.is_file():
        return None
    return RunConfig.from_json(json.loads(p.read_text())["run"])


def prepare_folder(cfg: RunConfig, run_dir: Path) -> list[Utterance]:
    """Write config + set on a new folder; check they match on an existing one."""
    cfg_path = run_dir / "config.json"
    if cfg_path.is_file():
        saved = json.loads(cfg_path.read_text())
        items = load_items(run_dir)
        fresh = {**cfg.to_json(), "set_sha256": None}
        try:
            fresh["set_sha256"] = set_digest(load_set(cfg.set, cfg.limit, list(cfg.categories) or None))
        except SetError:
            fresh["set_sha256"] = saved["set_sha256"]  # set file gone or moved: the saved copy is used
        old = {"seeds": 1, "voices": [], **saved["run"], "set_sha256": saved["set_sha256"]}  # from before --seeds, --voice
        # Settings added since the folder was made (the guardrails, text repetition) hold their defaults there.
        old["sampling"] = dataclasses.asdict(SamplingSettings(**old["sampling"]))
        old["stream"] = dataclasses.asdict(StreamSettings(**old["stream"]))
        diff = [k for k in IDENTITY_KEYS if json.dumps(fresh.get(k), sort_keys=True) != json.dumps(old.get(k), sort_keys=True)]
        if diff:
            raise RunError(f"{run_dir} holds a run with different {', '.join(diff)}; "
                           "resume with the same settings or pass a new --out")
        return items
    if run_dir.exists() and any(p.name != ".lock" for p in run_dir.iterdir()):
        raise RunError(f"{run_dir} exists and is not a run folder (no config.json); pick a new --out")
    items = load_set(cfg.set, cfg.limit, list(cfg.categories) or None)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "wav").mkdir(exist_ok=True)
    write_bytes_atomic(run_dir / "set.jsonl", "".join(
        json.dumps({"id": u.id, "text": u.text, "category": u.category, **({"ref_audio": u.ref_audio} if u.ref_audio else {})}) + "\n"
        for u in items).encode())
    write_json_atomic(cfg_path, {
        "version": 1, "run": cfg.to_json(), "set_path": str(resolve_set_path(cfg.set)),
        "set_sha256": set_digest(items), "items": len(items),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    })
    return items


def done_rows(run_dir: Path, repair: bool = False) -> list[dict]:
    rows = read_jsonl(run_dir / "rows.jsonl", repair=repair)
    seen, out = set(), []
    for r in rows:
        if r["id"] in seen:
            raise RunError(f"{run_dir}/rows.jsonl has two rows for {r['id']!r}")
        seen.add(r["id"])
        out.append(r)
    return out


def error_rows(run_dir: str | Path) -> list[dict]:
    """Utterances refused before synthesis (id, category, text length, error)."""
    return read_jsonl(Path(run_dir) / "errors.jsonl", repair=True)


def synthesized_rows(run_dir: Path) -> list[dict]:
    """The rows of a run folder that scoring and reporting read; a clear error when there are none."""
    if not (run_dir / "config.json").is_file():
        raise RunError(f"{run_dir} is not a run folder (no config.json)")
    rows = done_rows(run_dir)
    if not rows:
        raise RunError(f"{run_dir} has no synthesized utterances yet")
    return rows


def make_row(u: Utterance, s, seed: int, cfg: RunConfig, ref: Reference | None = None,
             speaker_sim: float | None = None) -> dict:
    """One utterance's row; every field is defined in eval.engines / eval.scoring.metrics / gepard_demo.voice.similarity."""
    return {
        "id": u.id, "sentence": u.sentence_id, "sample": u.sample, "category": u.category, "text": u.text,
        "spoken": row_spoken(cfg, u.text), "words": u.words, "text_tokens": s.text_tokens,
        "frames": s.frames, "stop_fired": s.stop_fired, "stop_frame": s.stop_frame, "runaway": s.runaway,
        "duration_s": s.duration_s, "sample_rate": s.sample_rate, "p_stop": s.p_stop,
        "ttfa_s": s.ttfa_s, "rtf": s.rtf, "gen_s": s.gen_s, "decode_s": s.decode_s,
        "seed": s.seed, "wav": f"wav/{u.id}.wav", "codes": None if s.codes is None else f"codes/{u.id}.npy",
        "server_error": s.error, "ref_audio": ref if isinstance(ref, str) else None, "voice": u.voice,
        "speaker_sim": speaker_sim,
        "ended_by": s.ended_by, "force_stopped": s.force_stopped, "force_stop": s.force_stop,
        **s.probe_fields(),
        "settings": row_settings(cfg, seed),
    }


def _load_engine(cfg: RunConfig, log):
    from eval.engines import load_engine

    return load_engine(cfg.engine, cfg.model, cfg.device, cfg.model_cache, server_urls=cfg.server_urls,
                       server_timeout=cfg.server_timeout, concurrency=cfg.server_concurrency, log=log)


def run(cfg: RunConfig, run_dir: str | Path, engine: SpeechEngine | None = None, progress=None, log=print) -> Path:
    """Synthesize every utterance of cfg.set that has no row yet in run_dir, each a SynthesisItem.

    engine: an eval.engines.base.SpeechEngine (loaded from cfg when None; only if work is left).
    progress: optional callable(done, total) (the Gradio tab); tqdm is shown on stderr too.
    """
    run_dir = Path(run_dir)
    with _writing(run_dir):
        if not cfg.sampling.text_repetition:  # refused before the folder is written where it changes nothing
            engine = engine or _load_engine(cfg, log)
            why = text_repetition_error(engine, load_set(cfg.set, cfg.limit, list(cfg.categories) or None))
            if why:
                raise RunError(why)
        items = expand_voices(expand_samples(prepare_folder(cfg, run_dir), cfg.seeds), cfg.voices)
        done = {r["id"] for r in done_rows(run_dir, repair=True)} | {r["id"] for r in error_rows(run_dir)}
        if done:
            log(f"resuming {run_dir}: {len(done)}/{len(items)} done")
        pending = pending_items(cfg, run_dir, items, done, log)
        if cfg.engine == "piper" and any(u.ref_audio for u in pending):
            raise RunError("--engine piper cannot take this set's ref_audio column (local, local-stream and server can)")
        rows = _Rows(run_dir, cfg, len(items), len(done), progress)
        if pending:
            engine = engine or _load_engine(cfg, log)
            note_session(run_dir, engine.describe(), len(done))
            # Every utterance handed over at once, each row written as it ends (any order): a
            # server pool, a running batch, batch after batch, or files looked up by id (eval/engines).
            seeds = [sample_seed(cfg.base_seed, u.sentence_id, u.sample) for u in pending]
            batch = [SynthesisItem(u.text, sd, reference(u, cfg), u.id) for u, sd in zip(pending, seeds)]
            for i, s in engine.synthesize_each(batch, cfg.sampling, cfg.stream, batch_size=cfg.batch_size):
                rows.keep(pending[i], seeds[i], s, batch[i].ref)
        rows.bar.close()
        write_json_atomic(run_dir / "status.json", {"done": rows.done, "errors": len(error_rows(run_dir)),
                                                    "total": len(items), "complete": rows.done == len(items)})
        return run_dir


def reference(u: Utterance, cfg: RunConfig) -> Reference | None:
    """The voice an utterance is spoken in: its saved voice, its set's recording, the run's, or none."""
    if u.voice is not None:
        return VoiceRef(u.voice, cfg.voices_dir)
    return u.ref_audio or cfg.ref_audio


@contextlib.contextmanager
def _writing(run_dir: Path) -> Iterator[None]:
    """The run folder, made and held by this process alone (a lock file) while the block runs. A
    new run that fails before its first row (a bad --model, a missing --files) takes back all it
    wrote, so the corrected command starts afresh instead of meeting "a run with different model"."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunError(f"--out {run_dir} is a file, not a run folder; pick a new --out")
    before = set(run_dir.iterdir()) if run_dir.is_dir() else None
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    run_dir.mkdir(exist_ok=True)
    with open(run_dir / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(f"{run_dir} is being written by another process") from None
        try:
            yield
        except BaseException:
            if not (run_dir / "rows.jsonl").exists() and run_dir / "config.json" not in (before or ()):
                for p in set(run_dir.iterdir()) - (before or set()):
                    shutil.rmtree(p) if p.is_dir() else p.unlink()
                if before is None:
                    run_dir.rmdir()
            raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def pending_items(cfg: RunConfig, run_dir: Path, items: list[Utterance], done: set[str], log) -> list[Utterance]:
    """The utterances left to synthesize; one the settings cannot take gets its errors.jsonl row
    (and joins `done`) instead."""
    pending = []
    for u in items:
        if u.id in done:
            continue
        why = input_error(u, cfg.sampling, cfg.engine)
        if why is None:
            pending.append(u)
            continue
        append_jsonl(run_dir / "errors.jsonl", {"id": u.id, "category": u.category, "chars": len(u.text), "error": why})
        log(f"{u.id}: refused, {why}")
        done.add(u.id)
    return pending


def note_session(run_dir: Path, engine: dict, already_done: int) -> None:
    """environment.json gains this session: when, what was done before it, the engine (its
    description) and the machine."""
    env_path = run_dir / "environment.json"
    sessions = json.loads(env_path.read_text())["sessions"] if env_path.is_file() else []
    sessions.append({"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "already_done": already_done, "engine": engine, **environment()})
    write_json_atomic(env_path, {"sessions": sessions})


class _Rows:
    """Each finished utterance written: its audio, its row (with its speaker similarity to its
    reference, where it has one), the bar and the caller's progress."""

    def __init__(self, run_dir: Path, cfg: RunConfig, total: int, done: int, progress):
        self.run_dir, self.cfg, self.total, self.done, self.progress = run_dir, cfg, total, done, progress
        self.bar = tqdm(total=total, initial=done, desc=f"synth {run_dir.name}", unit="utt")
        self._similarity: SpeakerSimilarity | None = None  # loaded on the first reference
        self._missing: set[str] = set()  # saved voices with no local clip

    def keep(self, u: Utterance, seed: int, s, ref: Reference | None = None) -> None:
        save_audio(self.run_dir, u, s)
        sim = None
        if ref:
            if self._similarity is None:
                from gepard_demo.voice.similarity import SpeakerSimilarity

                self._similarity = SpeakerSimilarity()
            sim = self._voice_similarity(ref, s) if isinstance(ref, VoiceRef) else \
                self._similarity.similarity(ref, s.audio, s.sample_rate)
        append_jsonl(self.run_dir / "rows.jsonl", make_row(u, s, seed, self.cfg, ref, sim))
        self.done += 1
        self.bar.update(1)
        if self.progress:
            self.progress(self.done, self.total)

    def _voice_similarity(self, ref: VoiceRef, s) -> float | None:
        """The output against the saved voice's own clip, as a recording's rows are scored; None (said
        once) where the voice is not in --voices-dir here (a server's own voice, not copied)."""
        from gepard_demo.units import SAMPLE_RATE
        from gepard_demo.voice.library import VoiceError

        assert self._similarity is not None  # keep() loads it before it asks here
        if ref.name in self._missing:
            return None
        try:
            clip = self._similarity.reference_audio(f"voice {ref.name.lower()}", lambda: (ref.clip(), SAMPLE_RATE))
        except VoiceError as e:
            self._missing.add(ref.name)
            tqdm.write(f"speaker similarity: {e} (no local copy of the server's voice): its rows have none")
            return None
        return self._similarity.cosine(clip, s.audio, s.sample_rate)
