"""Session fixtures shared by every test module: the tiny checkpoint, built once, on disk."""

from __future__ import annotations

import os

# One thread per process, children included (the CLI, an app, a server, a benchmark started as a
# process inherit it): pytest-xdist's workers share two cores, and a child whose OpenMP started a
# thread per core spun against the other worker (docs/DESIGN.md, "Tests that hold at any speed").
# A test or script that sets its threads itself still does.
os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
from tests.support.hold_fixtures import install_endless_seed

from gepard_demo.model.checkpoints.tiny import LAYOUTS, ensure_tiny
from gepard_demo.model.engine import GepardEngine


@pytest.fixture(scope="session", autouse=True)
def _endless_seed():
    # A request seeded hold_fixtures.ENDLESS_SEED never ends by itself (the Stop tests); installed
    # before any test forks a GPU worker, so the workers have it too. No other seed is touched.
    undo = install_endless_seed()
    yield
    undo()


@pytest.fixture(scope="session", autouse=True)
def _one_thread():
    # facts §8: on these CPUs the Qwen3.5 decode is fastest (and steadiest) with one thread.
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_cache_dir(tmp_path_factory):
    """A cache dir holding the tiny checkpoint, for code that resolves `--model tiny` itself."""
    cache = tmp_path_factory.mktemp("gepard-cache")
    ensure_tiny(cache)
    return cache


@pytest.fixture(scope="session")
def tiny_model_dir(tiny_cache_dir):
    return ensure_tiny(tiny_cache_dir)


@pytest.fixture(scope="session")
def tiny_engine(tiny_cache_dir):
    return GepardEngine.load("tiny", cache_dir=tiny_cache_dir)


@pytest.fixture(scope="session", params=LAYOUTS)
def tiny_layout(request):
    """Both tiny layouts: "full" (Gepard-1.0 in miniature) and "hybrid" (3 linear + 1 full)."""
    return request.param


@pytest.fixture(scope="session")
def layout_engine(tiny_cache_dir, tiny_layout):
    """The tiny engine in each layout: engine, streaming and batch tests run on both."""
    return GepardEngine.load(str(ensure_tiny(tiny_cache_dir, layout=tiny_layout)))
