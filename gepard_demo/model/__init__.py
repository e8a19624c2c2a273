"""The talker and what it needs: text ids in, 32-code frames and p_stop out (facts §1-3).

- config.py     `GepardConfig` from config.json + gepard_config.json
- prompt.py     `build_prompt_ids` (speaker slots, text repetition, SOS), `encode_text`, `normalize_text`
- talker.py     `GepardTalker` (Qwen3.5 backbone + heads + frame embedding), checkpoint loading
- sampling.py   `RowSampler`, `sample_codes`: Gumbel-max / top-k / greedy per request
- generation.py `FrameStep`, `GenerationResult`, the padded batch's masks, CFG's logit mix
- batch.py      `DecodeBatch`: the decode loop; requests join a running batch between steps and
                leave as they end (cache_rows.py: the cache's row surgery); `decode_batch`
- engine.py     `GepardEngine`: tokenizer + talker; `generate()` (a batch), `stream_frames()` (one request)
- request.py    `FrameRequest`: one request to an engine, taken whole by every engine's `stream_frames`
- frames.py     `FrameSource`: what `stream_frames` returns on every engine; `FrameMaker`, their base
- attention.py  grouped SDPA for a padded batch on a CPU (transformers' own elsewhere)
- memory.py     `check_fits`: the GPU memory a batch of rows x frames needs, refused up front
- seams.py      the engine and codec seams as Protocols (`FrameEngine`, `Engine`, `AudioCodec`), `ModelInfo`,
                and `WrappedEngine`, which a wrapper (scheduler, pipeline) forwards the rest through
- fixed_shape/  the same step at fixed shapes, one CUDA graph replay a frame on a GPU
- guards/       what watches a row: the repetition penalty, the guardrails, the probe, how a run ended
- checkpoints/  where a model comes from: `resolve_model`, the tiny checkpoint, the full-size shape
"""
