"""Whether this machine's GPU is usable from this PyTorch, and the start-up line that says so.

PyPI's torch 2.13.0 for Linux is a CUDA 13.0 build (it pulls cuda-toolkit 13.0.3): it needs an
NVIDIA driver of the R580 branch or newer. Under an older driver `torch.cuda.is_available()`
is simply False, and an app that falls back to the CPU does so silently: a GPU Space that streams
slower than real time with no word why. So the start-up line names the device, the CUDA build,
the driver and the dtype, and when an NVIDIA GPU is present but CUDA is unusable, `problem()`
says why and what to change, for the page's banner.

Reading the driver version initialises nothing: /proc/driver/nvidia/version, else nvidia-smi.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import torch

# The oldest driver branch each CUDA major version runs on (NVIDIA's CUDA toolkit release notes).
MIN_DRIVER = {11: 450, 12: 525, 13: 580}
PROC_VERSION = Path("/proc/driver/nvidia/version")
PROC_GPUS = Path("/proc/driver/nvidia/gpus")


def driver_version(proc_version: Path = PROC_VERSION) -> str | None:
    try:
        found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", proc_version.read_text())
        if found:
            return found.group(1)
    except OSError:
        pass
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=5).stdout.strip().splitlines()
            return out[0].strip() if out else None
        except (OSError, subprocess.SubprocessError):
            return None
    return None


def gpu_present(proc_gpus: Path = PROC_GPUS) -> bool:
    """An NVIDIA GPU is attached (its driver is loaded), whether or not torch can use it."""
    try:
        return any(proc_gpus.iterdir())
    except OSError:
        return Path("/dev/nvidia0").exists()


@dataclass(frozen=True)
class CudaReport:
    torch_version: str
    cuda_build: str | None  # torch.version.cuda: None for a CPU-only build
    driver: str | None
    gpu_present: bool
    usable: bool  # torch.cuda.is_available()
    zerogpu: bool = False

    @classmethod
    def here(cls, zerogpu: bool = False) -> "CudaReport":
        return cls(torch.__version__, torch.version.cuda, driver_version(), gpu_present(), torch.cuda.is_available(),
                   zerogpu)

    def problem(self) -> str | None:
        """Why a GPU that is there cannot be used, and what to change (None: nothing wrong)."""
        if self.usable or not self.gpu_present:
            return None
        if self.cuda_build is None:
            return (f"this PyTorch ({self.torch_version}) is a CPU-only build: install the CUDA one "
                    "(`pip install torch==2.13.0` from PyPI)")
        need = MIN_DRIVER.get(int(self.cuda_build.split(".")[0]))
        have = int(self.driver.split(".")[0]) if self.driver else None
        if need and have is not None and have < need:
            return (f"torch {self.torch_version} is built for CUDA {self.cuda_build}, which needs NVIDIA driver "
                    f"{need} or newer; this machine's driver is {self.driver}. Use a torch build for the driver's "
                    f"CUDA (for example the cu128 wheels: `--extra-index-url https://download.pytorch.org/whl/cu128` "
                    "in requirements.txt) or a newer driver")
        return (f"CUDA {self.cuda_build} does not initialise with driver {self.driver or 'unknown'} "
                f"(torch {self.torch_version}); `python -c 'import torch; torch.cuda.init()'` shows the error")

    def line(self, device: str, dtype: str, gpu_name: str | None = None) -> str:
        """device (name), torch and its CUDA build, driver, dtype: printed at start-up."""
        where = f"{device} ({gpu_name})" if gpu_name else device
        parts = [f"device {where}", f"torch {self.torch_version} (CUDA build {self.cuda_build or 'none: CPU only'})",
                 f"driver {self.driver or 'none found'}", f"dtype {dtype}"]
        if self.zerogpu:
            parts.append("ZeroGPU")
        line = " · ".join(parts)
        problem = self.problem()
        return line if problem is None else f"{line}\nGPU PRESENT BUT UNUSABLE, running on the CPU: {problem}"
