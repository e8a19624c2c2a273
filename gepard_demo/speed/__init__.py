"""Speed paths the engine composes: lower-precision backbone weights (quantize.py), the talker
ahead of the codec on its own thread (pipeline.py), the pick for the hardware found (select.py),
and the fidelity guard every fast path must pass (fidelity.py)."""

from .fidelity import FidelityReport, compare, snr_db, trace
from .pipeline import PipelinedEngine
from .quantize import apply_precision, quantize_backbone_int8
from .select import Hardware, apply_speed, detect_hardware, pick_speed
from .settings import PRECISIONS, SpeedError, SpeedSettings

__all__ = [
    "PRECISIONS",
    "FidelityReport",
    "Hardware",
    "PipelinedEngine",
    "SpeedError",
    "SpeedSettings",
    "apply_precision",
    "apply_speed",
    "compare",
    "detect_hardware",
    "pick_speed",
    "quantize_backbone_int8",
    "snr_db",
    "trace",
]
