"""What a GPU Space needs decided before anything runs, tested on the CPU: the memory a batch
needs against what the GPU has free, whether the GPU that is there is usable by this PyTorch
(the driver a CUDA build needs), and the page saying so."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from tests.support.app_fixtures import tiny_codec  # noqa: F401  (fixture)

from gepard_demo.model import engine as engine_module
from gepard_demo.model.checkpoints.full_size import full_size_config
from gepard_demo.model.memory import GpuMemoryError, batch_bytes, check_fits
from gepard_demo.settings import SamplingSettings
from gepard_demo.speed.cuda_check import CudaReport, driver_version, gpu_present
from gepard_demo.ui.hosts.model_host import ModelHost
from gepard_demo.ui.page.banner import banner_markdown

GIB = 2**30


def _gpu_engine():
    talker = SimpleNamespace(backbone_dtype=torch.bfloat16)
    return SimpleNamespace(device=torch.device("cuda", 0), config=full_size_config(), talker=talker)


def test_a_batch_that_cannot_fit_is_refused_up_front(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (8 * GIB, 70 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: 2 * GIB)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda device=None: 1 * GIB)
    engine = _gpu_engine()
    check_fits(engine, 16, 40, 300)  # about 0.7 GiB: fits
    with pytest.raises(GpuMemoryError, match="256 rows x 4096 frames.*9.0 of 70.0 GiB is free"):
        check_fits(engine, 256, 40, 4096)
    # The KV cache is what grows: 14 layers x K,V x 2 KV heads x 256 dims x 2 bytes a position.
    one = batch_bytes(engine.config, 1, 40, 1000, torch.bfloat16)
    assert batch_bytes(engine.config, 2, 40, 1000, torch.bfloat16) - one == pytest.approx(one - 512 * 2**20, rel=0.01)
    assert batch_bytes(engine.config, 1, 40, 2000, torch.bfloat16) - one == 1000 * 14 * 2 * 2 * 256 * 2


def test_generate_checks_the_batch_with_its_guidance_rows(tiny_engine, monkeypatch):
    seen = []
    monkeypatch.setattr(engine_module, "check_fits", lambda engine, rows, prompt, frames: seen.append((rows, frames)))
    tiny_engine.generate(["Hi.", "A longer line of text."], [SamplingSettings(max_frames=3, seed=1),
                                                             SamplingSettings(max_frames=5, seed=2, cfg_scale=2.0)])
    assert seen == [(3, 5)]  # two requests, one of them guided: three rows; the longest budget
    check_fits(tiny_engine, 10_000, 10_000, 10_000)  # on a CPU: nothing to check


def test_driver_version_from_the_kernel_module(tmp_path):
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n")
    assert driver_version(proc) == "535.104.05"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n")
    assert driver_version(proc) == "580.65.06"
    assert gpu_present(tmp_path / "no-such-dir") == Path("/dev/nvidia0").exists()


def test_a_gpu_that_cuda_cannot_use_is_said_loudly():
    old_driver = CudaReport("2.13.0", "13.0", "535.104.05", gpu_present=True, usable=False)
    problem = old_driver.problem()
    assert "CUDA 13.0, which needs NVIDIA driver 580" in problem and "535.104.05" in problem and "cu128" in problem
    assert "GPU PRESENT BUT UNUSABLE" in old_driver.line("cpu", "float32")
    cpu_build = CudaReport("2.13.0+cpu", None, "550.54", gpu_present=True, usable=False)
    assert "CPU-only build" in cpu_build.problem()
    assert CudaReport("2.13.0", "13.0", "580.65.06", True, True).problem() is None
    assert CudaReport("2.13.0+cpu", None, None, False, False).problem() is None  # no GPU: nothing wrong
    line = CudaReport("2.13.0", "13.0", "580.65.06", True, True, zerogpu=True).line("cuda", "bfloat16", "NVIDIA H200")
    assert line == ("device cuda (NVIDIA H200) · torch 2.13.0 (CUDA build 13.0) · driver 580.65.06 · dtype bfloat16"
                    " · ZeroGPU")


def test_the_banner_carries_the_hardware_notices(tiny_engine, tiny_codec):
    host = ModelHost(tiny_engine, tiny_codec, "nineninesix/gepard-1.0",
                     notices=["⚠️ **This machine has an NVIDIA GPU, but PyTorch cannot use it**"])
    assert "PyTorch cannot use it" in banner_markdown(host).split("<details>")[0]
