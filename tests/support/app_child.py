"""`python tests/support/app_child.py APP_ARGS...`: app.py in a real second process with the tests' hooks,
and, with SPACES_ZERO_GPU=true (and the device API's URL: tests/support/zerogpu_device.py), on a ZeroGPU
Space's runtime: the real `spaces` package, with a CPU build of torch.

`spaces` needs CUDA in two places only, and this process (and the workers it forks) alone gets
the least shim that lets a CPU torch through them:

- `spaces/zero/torch/static.py` reads `torch.version.cuda` at import: a CUDA build's "13.0"; and
  `patching.py` keeps `torch._C._cuda_init` to restore it later: a CPU build has none; and it asks
  `torch.cuda._is_in_bad_fork` in a process pool: a CPU build's is an unpicklable lambda;
- a worker's `torch.init` initialises CUDA on the GPU the API handed out, and `torch.move` copies
  the weights packed at start-up to it: here `init` only sets CUDA_VISIBLE_DEVICES, and `move`
  reads the same packs back into CPU tensors. The model then computes on the CPU in the worker,
  where it would on the GPU.

Everything else is spaces' own: its CUDA emulation in the main process (which raises if anything
initialises CUDA there), the weight packing, start-up report, schedule with the visitor's
X-IP-Token and the duration each call asks, /allow, the forked workers and their reuse, the
pickling of arguments and yields, stop between items, release, and its refusals.

Test hooks, for this process only: a request seeded hold_fixtures.ENDLESS_SEED never ends; a text
that contains UNPICKLABLE makes its GPU call yield something that cannot be pickled;
GEPARD_TEST_COLD_START_S delays each fresh ZeroGPU worker's `move` (a slow CUDA init and weight
transfer).
"""

import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def _no_cuda():
    raise RuntimeError("this torch is a CPU build: CUDA cannot initialise")


def _never_in_bad_fork() -> bool:
    return False  # no CUDA, so no fork after its init: what a CPU build's stub lambda says, picklable


if ZERO_GPU and torch.version.cuda is None:
    torch.version.cuda = "13.0"
    torch._C._cuda_init = _no_cuda  # a CPU build has no low-level CUDA init for spaces to guard
    torch.cuda._is_in_bad_fork = _never_in_bad_fork  # spaces asks it in a forked process pool at import
if ZERO_GPU:
    import spaces  # noqa: E402,F401  (patches torch, as on a Space: before anything else touches it)
    from spaces.zero import torch as zero_torch  # noqa: E402
    from spaces.zero.torch import patching  # noqa: E402

from tests.support.hold_fixtures import install_endless_seed  # noqa: E402  (after spaces, which must come first)

UNPICKLABLE = "UNPICKLABLE"


def cpu_init(nvidia_uuid: str) -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = nvidia_uuid


def cpu_move(callback=None) -> None:
    """spaces' packs (written at start-up) back into CPU tensors, each fake given its data."""
    delay = float(os.environ.get("GEPARD_TEST_COLD_START_S", "0"))
    if delay:
        time.sleep(delay)
    for fake, original in patching.cuda_aliases.items():
        if original is not None:
            fake.data = original
    for pack in patching.tensor_packs:
        raw = torch.frombuffer(bytearray(Path(pack.path()).read_bytes()), dtype=torch.uint8)
        offset = 0
        for tensor, size, aligned in [t for batch in pack.batches for t in batch] + list(pack.big_tensors):
            data = raw[offset:offset + size].view(tensor.dtype)
            restored = torch.as_strided(data, tensor.shape, tensor.stride()).clone()
            for fake in pack.fakes[tensor]:
                fake.data = restored
            offset += aligned


def _unpicklable_stream():
    from gepard_demo.zerogpu import tasks

    stream = tasks.stream

    def stream_with_hook(resident, request):
        for item in stream(resident, request):
            yield item
            if UNPICKLABLE in request.utterance.text:
                yield lambda: None  # pickling this fails in the worker, as spaces reports it

    tasks.stream = stream_with_hook


if __name__ == "__main__":
    if ZERO_GPU:
        zero_torch.init, zero_torch.move = cpu_init, cpu_move
    install_endless_seed()
    _unpicklable_stream()
    sys.argv = [str(Path(__file__).resolve().parents[2] / "app.py"), *sys.argv[1:]]
    from app import main

    main()
