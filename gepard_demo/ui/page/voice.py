"""The page's "Voice and guidance" group: a reference voice (upload or microphone, or one of
the example voices Piper makes on the spot) and the classifier-free guidance controls.

The group is its own small block of the Speak tab: the reference clip, then the settings declared
in the "voice" group (guidance; controls.CONTROL_NAMES). The controller turns the
reference into a speaker prefix through `VoiceCloning`, which builds the prefixer on first use
(the checkpoint's compressor and the codec's encoder) and caches prefixes by content hash.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import gradio as gr
import numpy as np
from gradio.components import Component

from gepard_demo.ui.page.controls import REFERENCE
from gepard_demo.ui.page.fields import build_group
from gepard_demo.ui.page.saved_voices import SavedVoicesUI, build_saved_voices
from gepard_demo.units import Json
from gepard_demo.voice.reference_audio import REFERENCE_WINDOW, PageAudio, ReferenceAudioError

if TYPE_CHECKING:
    import torch

    from gepard_demo.model.seams import Engine
    from gepard_demo.streaming.seams import Voices
    from gepard_demo.voice.speaker_prefix import SpeakerPrefix, SpeakerPrefixer
    from gepard_demo.zerogpu.tasks import Prefix


class PageVoices:
    """What the page does with a reference voice, whatever makes its prefix (`prefix`): the
    tokens for Generate, and the line under the upload the moment a reference arrives."""

    made_where = ""  # how `prepare` says where the prefix was made

    def prefix(self, ref_audio: PageAudio) -> SpeakerPrefix | Prefix | None:
        raise NotImplementedError

    def speaker(self, ref_audio: PageAudio) -> torch.Tensor | None:
        """The prefix tokens for a reference (None: the default voice)."""
        prefix = self.prefix(ref_audio)
        return None if prefix is None else prefix.tokens

    def prepare(self, ref_audio: PageAudio) -> str:
        """Run when a reference arrives (upload, recording, example): compute its prefix now,
        so Generate finds it cached, and say at once whether it is usable (Markdown)."""
        if ref_audio is None:
            return ""
        try:
            prefix = self.prefix(ref_audio)
        except ReferenceAudioError as exc:
            return f"**Reference voice not usable:** {exc}"
        if prefix is None:  # a clip that holds nothing to prepare: the default voice
            return ""
        return (f"Reference ready: {prefix.seconds:.1f} s of it used ({prefix.frames} codec frames), "
                f"prepared{self.made_where} in {prefix.compute_s:.1f} s; Generate speaks in this voice.")


class EngineHolder(Protocol):
    """A host whose own engine makes the prefixes (model_host.ModelHost)."""

    @property
    def engine(self) -> Engine: ...


class VoiceCloning(PageVoices):
    """Reference audio from the page -> a speaker prefix, for one model host."""

    def __init__(self, host: EngineHolder):
        self.host = host
        self._prefixer: SpeakerPrefixer | None = None
        self._error: str | None = None
        self._lock = threading.Lock()

    def prefixer(self) -> SpeakerPrefixer:
        with self._lock:
            if self._prefixer is None and self._error is None:
                from gepard_demo.codec.source import resolve_codec_source
                from gepard_demo.voice.speaker_prefix import SpeakerPrefixer

                try:
                    codec_path = resolve_codec_source(self.host.engine.codec_source())
                    self._prefixer = SpeakerPrefixer.for_engine(self.host.engine, codec_path)
                except (RuntimeError, ValueError, OSError, AttributeError) as exc:  # CompressorError, CodecLoadError, a served host
                    self._error = f"this model cannot clone a voice: {exc}"
            if self._prefixer is None:
                raise ReferenceAudioError(self._error)
            return self._prefixer

    def prefix(self, ref_audio: PageAudio) -> SpeakerPrefix | None:
        """Gradio Audio value (None, a (rate, samples) tuple, or a file path) -> SpeakerPrefix or None."""
        if ref_audio is None:
            return None
        if isinstance(ref_audio, (str, Path)):
            return self.prefixer().from_file(ref_audio)
        if isinstance(ref_audio, (tuple, list)) and len(ref_audio) == 2:
            rate, samples = ref_audio
            return self.prefixer().from_array(np.asarray(samples), int(rate))
        raise ReferenceAudioError(f"unexpected reference audio value of type {type(ref_audio).__name__}")


def example_voices() -> list[str]:
    """Piper-made example reference voices (none when Piper is not installed)."""
    from gepard_demo.voice.piper_voices import make_example_voices

    try:
        return [str(p) for p in make_example_voices(Path(tempfile.gettempdir()) / "gepard-example-voices")]
    except ImportError:
        return []


def build_voice_group(values: Mapping[str, Json], saved: bool = False) -> tuple[dict[str, Component], gr.Markdown,
                                                                                SavedVoicesUI | None]:
    """(the group's controls by name, the reference's status line, the saved voices' picker where
    `saved`: saved_voices.py); `values`: what they show."""
    with gr.Accordion("Voice and guidance", open=False, elem_id="gepard-voice-group"):
        ref_audio = gr.Audio(
            sources=["upload", "microphone"], type="numpy", label=f"Reference voice ({REFERENCE_WINDOW.describe()}; empty = the default voice)",
            elem_id="gepard-ref-audio",
        )
        ref_status = gr.Markdown("", elem_id="gepard-ref-status")
        voices = example_voices()
        if voices:
            gr.Examples([[v] for v in voices], inputs=[ref_audio], label="Example voices (made by Piper just now)")
        picker = build_saved_voices() if saved else None
        controls = {REFERENCE: ref_audio, **build_group("voice", values)}
    return controls, ref_status, picker


def wire_voice_events(voices: Voices, ref_audio: gr.Audio, ref_status: gr.Markdown) -> None:
    """A reference is prepared as soon as it arrives, in the engine's queue (it runs the codec
    encoder, which would slow a generation running beside it)."""
    ref_audio.change(voices.prepare, ref_audio, ref_status, concurrency_limit=1, concurrency_id="gepard-engine",
                     show_progress="minimal", api_visibility="private")


if TYPE_CHECKING:  # the type checker holds each class to its seam's Protocol (mypy.ini)
    from gepard_demo.streaming.seams import Voices

    _VoiceCloning_is_a_Voices: type[Voices] = VoiceCloning
