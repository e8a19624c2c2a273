"""The reference backend: NeMo's own AudioCodecModel, for parity tests and evaluation.

NeMo is imported lazily (it is heavy, 14-39 s, and not a demo dependency). Restoring a `.nemo`
instantiates everything its config names; a training config's SLM discriminator downloads WavLM
from the hub, so the config is restored with the discriminator (and other training-only parts)
stripped, via NeMo's override-config mechanism. Decoding goes through NeMo's own path:
per-dim codes are folded into NeMo's group tokens, then `model.decode` dequantizes and decodes.

NeMo's decoder has no streaming state, so its streamer re-decodes: mode "exact" re-decodes the
whole history each push (exact, cost grows with length), mode "lookback" the last N frames.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from .base import Codec, StreamDecoder, check_mode
from .errors import CodecLoadError
from .fsq import Codes, FSQLayout, check_codes, codes_to_tokens
from .nemo_archive import read_config
from .stream import LookbackStreamDecoder

if TYPE_CHECKING:
    from nemo.collections.tts.models import AudioCodecModel

# Training-only config parts whose instantiation can reach the network or needs data.
_TRAINING_ONLY = ("discriminator", "slm_encoder", "slm_predictor", "train_ds", "validation_ds", "test_ds")


def restore_config(config: dict[str, Any]) -> dict[str, Any]:
    cfg = copy.deepcopy(config)
    for key in _TRAINING_ONLY:
        cfg.pop(key, None)
    if cfg.get("use_slm_loss"):
        cfg["use_slm_loss"] = False
    if cfg.get("use_scl_loss"):  # would fetch a speaker encoder from the hub
        cfg["use_scl_loss"] = False
    return cfg


def import_audio_codec_model():
    try:
        from nemo.collections.tts.models import AudioCodecModel
    except ImportError as e:
        raise CodecLoadError(
            f"backend='nemo' needs NeMo: pip install -r requirements-nemo.txt -c constraints.txt ({e})"
        ) from e
    return AudioCodecModel


class NemoCodec(Codec):
    backend = "nemo"

    def __init__(self, model: AudioCodecModel, layout: FSQLayout, source: str, device: torch.device):
        self.model = model
        self.layout = layout
        self.source = source
        self.device = device
        self.sample_rate = int(getattr(model, "output_sample_rate", model.sample_rate))
        self.samples_per_frame = int(model.samples_per_frame)

    @classmethod
    def from_nemo(cls, path: Path, device: str | torch.device = "cpu") -> "NemoCodec":
        from omegaconf import OmegaConf

        AudioCodecModel = import_audio_codec_model()
        config = read_config(path)
        layout = FSQLayout.from_config(config.get("vector_quantizer"))
        device = torch.device(device)
        try:
            model = AudioCodecModel.restore_from(
                str(path),
                override_config_path=OmegaConf.create(restore_config(config)),
                map_location=device,
                strict=False,
            )
        except Exception as e:
            raise CodecLoadError(f"NeMo could not restore {path}: {type(e).__name__}: {e}") from e
        model.eval()
        return cls(model, layout, str(path), device)

    def _tokens(self, codes: Codes) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = codes_to_tokens(codes, self.layout)  # (T, G)
        t = tokens.T.unsqueeze(0).to(self.device)  # NeMo wants (B, G, T)
        return t, torch.tensor([t.shape[-1]], device=self.device)

    def dequantize(self, codes: Codes) -> torch.Tensor:
        """NeMo's own dequantization of per-dim codes: (T, 32) float32."""
        tokens, tokens_len = self._tokens(codes)
        with torch.inference_mode():
            deq = self.model.dequantize(tokens=tokens, tokens_len=tokens_len)
        return deq[0].T.float().cpu()

    def decode(self, codes: Codes) -> np.ndarray:
        codes = check_codes(codes, self.layout)
        if codes.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        tokens, tokens_len = self._tokens(codes)
        with torch.inference_mode():
            audio, audio_len = self.model.decode(tokens=tokens, tokens_len=tokens_len)
        return audio[0, : int(audio_len[0])].float().cpu().numpy()

    def streamer(self, mode: str = "exact", lookback: int = 8) -> StreamDecoder:
        check_mode(mode, lookback)
        return LookbackStreamDecoder(
            self.decode, self.layout, self.samples_per_frame, None if mode == "exact" else lookback
        )
