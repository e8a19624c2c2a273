"""A run folder: what a batch synthesis writes, resumes and scores.

- run.py          `RunConfig`, `run()` (synthesize a set into a folder, resumable), the folder's rows
- rows.py         `save_audio()`, `row_settings()`: a finished utterance's files and the settings its row records
- locate.py       `run_path()`: the folder a run argument names (a path, or a name in a runs folder)
- score.py        `score()`: ASR over a run folder's WAVs, resumable; `asr_tag`
- words.py          `align_words()`: each scored row's word alignment (every error placed in time), resumable
- measure.py      `measure()`: timing, loops and DNSMOS over a run folder's audio, resumable
- checks.py       what a run refuses before synthesis (to errors.jsonl, or the whole run)
- sets.py         built-in (eval/sets/) and user test sets; `Utterance`
- seeds.py        per-utterance seeds from (base seed, id, sample)
- environment.py  packages and machine recorded per (re)start
"""
