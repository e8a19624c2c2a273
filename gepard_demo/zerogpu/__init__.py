"""The GPU behind a process boundary, the way Hugging Face's ZeroGPU runs it.

On a ZeroGPU Space the model is placed on 'cuda' at start-up in the main process, but the GPU
exists only inside `@spaces.GPU` calls, which run in a forked worker process: their arguments and
what they return or yield are pickled, and nothing the worker writes reaches the main process.
So the app's GPU work is a few functions that take everything they need as arguments and hand
everything back as values:

Its modules, each in a line: docs/DESIGN.md's tree.
"""
