"""The decode step at fixed shapes, for a GPU to run as one CUDA graph replay per frame.

- slots.py        the step's memory: a KV cache of rows x columns slots, and the per-row tables
- step.py         `run_step`: one step with no host sync (backbone, heads, guidance, sampling, the stop)
- readback.py     a step's outputs to the host one step late (pinned buffers, events)
- shapes.py       `StepShapes`: the buffers per bucket and the graph captured for each
- fixed_batch.py  `FixedBatch`: DecodeBatch's surface over the fixed-shape step
- choice.py       `LoopChoice`: which loop an engine runs (the `cuda_graphs` setting)
"""
