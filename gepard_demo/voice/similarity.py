"""Speaker similarity: cosine of speaker embeddings of the reference recording and the output.

The embedding is Resemblyzer's GE2E speaker encoder (3-layer LSTM on 40-band mel frames,
256-d, L2-normalized). Chosen because its weights ship inside the PyPI wheel (`resemblyzer`,
17 MB `pretrained.pt`), so it runs offline here; SpeechBrain's ECAPA-TDNN and WeSpeaker load
theirs from a hub at run time, which these machines cannot reach. It is not the WavLM-TDNN
verification model seed-tts-eval reports (SIM-o), so its values are comparable across our
runs, not with published tables. Both sides go through Resemblyzer's own preprocess_wav
(16 kHz, volume normalization, long-silence trimming by WebRTC VAD) and embed_utterance (mean
of partial-utterance embeddings); a clip in which the VAD finds no speech at all (random-weight
noise) is embedded untrimmed. Silence has no embedding: its row's speaker_sim is None.

Values: 1 = the same embedding; two recordings of one speaker typically score ~0.75-0.85 with
this encoder, different speakers ~0.5-0.7. Random-weight Gepard makes noise, so its numbers
only show the path works.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gepard_demo.voice.reference_audio import PageAudio


class SpeakerSimilarityError(RuntimeError):
    pass


class SpeakerSimilarity:
    """Loaded once per run; reference embeddings are cached by file path."""

    name = "resemblyzer-ge2e"

    def __init__(self, device: str = "cpu"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                from resemblyzer import VoiceEncoder, preprocess_wav
        except ImportError as e:
            raise SpeakerSimilarityError(
                f"speaker similarity needs resemblyzer: pip install -r requirements-eval.txt -c constraints.txt ({e})"
            ) from e
        self._encoder = VoiceEncoder(device, verbose=False)
        self._preprocess = preprocess_wav
        self._refs: dict[str, np.ndarray] = {}

    def embed(self, audio: np.ndarray, sample_rate: int) -> np.ndarray:
        audio = np.asarray(audio, np.float32)
        if audio.size == 0 or float(np.max(np.abs(audio))) < 1e-4:  # silence: preprocess_wav would divide by 0
            raise SpeakerSimilarityError("silent audio has no speaker embedding")
        wav = self._preprocess(audio, source_sr=int(sample_rate))
        if wav.size < 1600:
            # The VAD found no speech (random-weight noise, a hum): embed the whole clip,
            # resampled and volume-normalized as preprocess_wav does, without the trimming.
            import librosa
            from resemblyzer.audio import normalize_volume
            from resemblyzer.hparams import audio_norm_target_dBFS, sampling_rate

            wav = librosa.resample(audio, orig_sr=int(sample_rate), target_sr=sampling_rate)
            wav = normalize_volume(wav, audio_norm_target_dBFS, increase_only=True)
        return self._encoder.embed_utterance(wav)

    def reference(self, path: str | Path) -> np.ndarray:
        key = str(Path(path).resolve())
        if key not in self._refs:
            from gepard_demo.voice.reference_audio import decode_audio, read_reference_file

            audio, rate = decode_audio(read_reference_file(path))
            self._refs[key] = self.embed(audio.mean(axis=1), rate)
        return self._refs[key]

    def reference_audio(self, key: str, load: Callable[[], tuple[np.ndarray, int]]) -> np.ndarray:
        """A reference given as mono samples (a saved voice's clip: `load()` -> (samples, rate), read
        only the first time), its embedding cached by `key`."""
        if key not in self._refs:
            self._refs[key] = self.embed(*load())
        return self._refs[key]

    def similarity(self, ref_path: str | Path, audio: np.ndarray, sample_rate: int) -> float | None:
        """Cosine of the recording's and the output's embeddings; None when the output is silent."""
        return self.cosine(self.reference(ref_path), audio, sample_rate)

    def cosine(self, ref: np.ndarray, audio: np.ndarray, sample_rate: int) -> float | None:
        """Cosine of a reference embedding and the output's; None when the output is silent."""
        try:
            out = self.embed(audio, sample_rate)
        except SpeakerSimilarityError:
            return None
        return float(np.dot(ref, out) / (np.linalg.norm(ref) * np.linalg.norm(out)))


def equal_error_rate(target: np.ndarray, nontarget: np.ndarray) -> tuple[float, float]:
    """(EER, its threshold) of a verifier's scores: `target` for trials of one speaker, `nontarget`
    for trials of two. The EER is where the false-accept rate (non-targets at or above the
    threshold) meets the false-reject rate (targets below it), read off the ROC between its two
    nearest points (the mean of the two rates there)."""
    from sklearn.metrics import roc_curve

    labels = np.r_[np.ones(len(target)), np.zeros(len(nontarget))]
    far, tpr, thresholds = roc_curve(labels, np.r_[target, nontarget])
    frr = 1.0 - tpr
    i = int(np.nanargmin(np.abs(far - frr)))
    return float((far[i] + frr[i]) / 2), float(thresholds[i])


class ReferenceSimilarity:
    """A page take in a reference voice: the cosine of the reference's embedding and its audio's.
    The encoder loads on the first take that has a reference; where it cannot (resemblyzer missing),
    or the audio is silent, there is no figure (None), never a guess."""

    def __init__(self):
        self._similarity: SpeakerSimilarity | None = None
        self._lock = threading.Lock()

    def score(self, ref_audio: PageAudio, wav_path: str | Path) -> float | None:
        import soundfile as sf

        from gepard_demo.voice.reference_audio import ReferenceAudioError, page_audio

        try:
            with self._lock:
                if self._similarity is None:
                    self._similarity = SpeakerSimilarity()
                samples, rate = page_audio(ref_audio)
                ref = np.asarray(samples, np.float32)
                ref = ref.mean(axis=1) if ref.ndim == 2 else ref
                audio, sr = sf.read(str(wav_path), dtype="float32")
                return self._similarity.cosine(self._similarity.embed(ref, rate), audio, sr)
        except (SpeakerSimilarityError, ReferenceAudioError, OSError):
            return None
