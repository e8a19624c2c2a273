"""The GPU behind a process boundary, the way Hugging Face's ZeroGPU runs it.

On a ZeroGPU Space the model is placed on 'cuda' at start-up in the main process, but the GPU
exists only inside `@spaces.GPU` calls, which run in a forked worker process: their arguments and
what they return or yield are pickled, and nothing the worker writes reaches the main process.
So the app's GPU work is a few functions that take everything they need as arguments and hand
everything back as values:

- resident.py  `Resident`: the engine, codec and speaker prefixer the GPU holds, and the gate
               that refuses their use outside a GPU call (in the main process)
- tasks.py     what runs inside a call: `stream` (one utterance: chunks, per-step events, the
               final stats), `speaker_prefix` (a reference voice), `call` (any picklable function
               of the resident, such as an eval batch); failures come back as values
- session.py   `GpuSession`: the main process's SynthesisSession look-alike over `stream`
- batched.py   `CallBatch`: inside a call, the playing segment and the next ones as rows of one
               batch, and what the next call goes on from
- budget.py    `GpuBudget`: how many segments each call makes and its ZeroGPU duration (frames,
               rows, CFG rows, reference length)
- runners.py   how a call crosses: `InProcess` (no boundary), `ZeroGpu` (`spaces.GPU`), and
               `Forked` (a forked worker process on any machine: the CPU test of the boundary)
- startup.py   ZeroGPU detection and its start-up report (this app never calls gr.Blocks.launch)
"""
