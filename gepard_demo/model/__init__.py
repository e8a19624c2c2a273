"""The talker and what it needs: text ids in, 32-code frames and p_stop out (facts §1-3).

- config.py     `GepardConfig` from config.json + gepard_config.json
- prompt.py     `build_prompt_ids` (speaker slots, text repetition, SOS), `encode_text`, `normalize_text`
- talker.py     `GepardTalker` (Qwen3.5 backbone + heads + frame embedding), checkpoint loading
- sampling.py   `RowSampler`, `sample_codes`: Gumbel-max / top-k / greedy per request
- ending.py     how a run ended: `ended_by` (stop, budget, force_stop, cancel) and the flags read from it
- generation.py `FrameStep`, `GenerationResult`, the padded batch's masks, CFG's logit mix
- batch.py      `DecodeBatch`: the decode loop; requests join a running batch between steps and
                leave as they end (cache_rows.py: the cache's row surgery); `decode_batch`
- engine.py     `GepardEngine`: tokenizer + talker; `generate()` (a batch), `stream_frames()` (one request)
- seams.py      the engine and codec seams as Protocols (`FrameEngine`, `Engine`, `AudioCodec`), `ModelInfo`,
                and `WrappedEngine`, which a wrapper (scheduler, pipeline) forwards the rest through
- source.py     `resolve_model`: a local directory, a Hugging Face id, or `tiny`
- tiny.py       `make_tiny` / `ensure_tiny`: the random-weight checkpoint in the published layout
- full_size.py  `build_full_size_engine`: Gepard-1.0's real shape with random weights (benchmarks)
"""
