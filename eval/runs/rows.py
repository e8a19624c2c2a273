"""A finished utterance on disk: its audio and codes (`save_audio`), and the settings its row
records (`row_settings`: what the engine really took, and nothing it did not). run.py writes the
row; the one-pass sweep (eval/sweeps/thresholds.py) writes its derived rows the same way."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np

from eval.jsonio import write_bytes_atomic
from eval.runs.sets import Utterance
from eval.scoring.audio import write_wav_atomic
from gepard_demo.settings import fixed_by_server
from gepard_demo.text.front_end import spoken_for


def save_audio(run_dir: Path, u: Utterance, s) -> None:
    """The utterance's WAV, and its codec codes where the engine kept them (`codes/<id>.npy`,
    int16, for the frame loop detector), each written whole or not at all."""
    write_wav_atomic(run_dir / "wav" / f"{u.id}.wav", s.audio, s.sample_rate)
    if s.codes is not None:
        buf = io.BytesIO()
        np.save(buf, np.asarray(s.codes, np.int16))
        write_bytes_atomic(run_dir / "codes" / f"{u.id}.npy", buf.getvalue())


def row_spoken(cfg, text: str) -> str | None:
    """What Gepard read for the row's written text (the text front end under the run's
    text_normalization and lexicon_entries), kept beside it; None where no Gepard read it (Piper,
    audio files)."""
    if cfg.engine in ("piper", "files"):
        return None
    s = cfg.sampling
    return spoken_for(text, s.text_normalization, s.lexicon_entries)


def row_settings(cfg, seed: int) -> dict:
    """The settings a row was really made with, and nothing it was not (cfg: the run's RunConfig,
    not imported here: run.py imports this module).

    A served model takes only the seed, a frame budget and the guardrail fields sent (the rest is
    fixed per server and recorded in environment.json); Piper takes none of Gepard's settings.
    """
    if cfg.engine == "server":
        from gepard_demo.serving.client import guardrail_fields

        s = cfg.sampling
        return {"server_urls": list(cfg.server_urls), "seed": seed, "max_new_tokens": s.max_frames,
                "guardrails": guardrail_fields(s),
                "fixed_by_server": f"{fixed_by_server()}: see environment.json"}
    if cfg.engine == "piper":
        return {"engine": "piper", "note": "Piper takes none of Gepard's sampling or streaming settings"}
    if cfg.engine == "files":
        return {"engine": "files", "source": cfg.model, "seed": seed,
                "note": "audio that existed before the run: the seed is the one this run pairs it with"}
    return {"sampling": dataclasses.asdict(cfg.sampling.replace(seed=seed)),
            "stream": dataclasses.asdict(cfg.stream), "batch_size": cfg.batch_size}
