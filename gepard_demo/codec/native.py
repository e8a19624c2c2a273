"""The NeMo-free backend: our causal HiFi-GAN decoder with weights read from the .nemo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from .base import Codec, StreamDecoder, check_mode
from .errors import CodecLoadError
from .fsq import Codes, FSQLayout, dequantize
from .hifigan import CausalHiFiGANDecoder, DecoderConfig, exact_gpu_convolutions, load_decoder
from .nemo_archive import read_nemo
from .graphed import ChunkCapture, GraphPool
from .stream import (DECODE_BLOCK_FRAMES, ExactStreamDecoder, GraphedLookbackDecoder, GraphedStreamDecoder,
                     LookbackStreamDecoder)


def codec_topology(config: dict[str, Any]) -> tuple[DecoderConfig, FSQLayout, int, int]:
    """(decoder config, FSQ layout, sample rate, samples per frame) from a model_config.yaml."""
    dec = DecoderConfig.from_config(config.get("audio_decoder"))
    layout = FSQLayout.from_config(config.get("vector_quantizer"))
    if layout.num_codes != dec.input_dim:
        raise CodecLoadError(
            f"quantizer yields {layout.num_codes} dims but audio_decoder.input_dim is {dec.input_dim}"
        )
    try:
        sample_rate = int(config.get("output_sample_rate") or config["sample_rate"])
    except KeyError as e:
        raise CodecLoadError("codec config has no sample_rate") from e
    spf = int(config.get("samples_per_frame", dec.samples_per_frame))
    if spf != dec.samples_per_frame:
        raise CodecLoadError(
            f"samples_per_frame {spf} != product of up_sample_rates {dec.up_sample_rates} = {dec.samples_per_frame}"
        )
    return dec, layout, sample_rate, spf


class NativeCodec(Codec):
    """decode() is one push into a fresh exact streamer, which decodes long inputs in blocks
    (stream.DECODE_BLOCK_FRAMES): the same samples as `decode_single_pass` (the streaming tests
    check it), faster on long inputs."""

    backend = "native"
    decode_block_frames = DECODE_BLOCK_FRAMES
    chunk_graphs: GraphPool | None = None  # streams over fixed buffers and graphs (use_chunk_graphs)

    def __init__(
        self,
        decoder: CausalHiFiGANDecoder,
        layout: FSQLayout,
        sample_rate: int,
        source: str = "<memory>",
        device: str | torch.device = "cpu",
    ):
        if torch.device(device).type == "cuda":
            exact_gpu_convolutions()
        self.decoder = decoder.to(device).eval()
        self.layout = layout
        self.sample_rate = int(sample_rate)
        self.samples_per_frame = decoder.samples_per_frame
        self.source = source

    @property
    def device(self) -> torch.device:
        """Where the decoder's weights are now, not where they were loaded: ZeroGPU moves them
        into a GPU call's worker after start-up."""
        return next(self.decoder.parameters()).device

    @classmethod
    def from_archive(
        cls, config: dict[str, Any], state: dict[str, torch.Tensor], source: str, device: str | torch.device = "cpu"
    ) -> "NativeCodec":
        dec_cfg, layout, sample_rate, _ = codec_topology(config)
        decoder = load_decoder(dec_cfg, state)
        return cls(decoder, layout, sample_rate, source=source, device=device)

    @classmethod
    def from_nemo(cls, path: Path, device: str | torch.device = "cpu") -> "NativeCodec":
        # Only the decoder's tensors are kept: discriminators can be larger than the decoder.
        archive = read_nemo(path, prefixes=("audio_decoder.",))
        return cls.from_archive(archive.config, archive.state_dict, source=str(path), device=device)

    def decode_single_pass(self, codes: Codes) -> np.ndarray:
        """The whole input through the decoder at once: the reference that streaming must equal."""
        x = dequantize(codes, self.layout)
        if x.shape[0] == 0:
            return np.zeros(0, dtype=np.float32)
        with torch.inference_mode():
            audio = self.decoder(x.T.unsqueeze(0).to(self.device))
        return audio[0].float().cpu().numpy()

    def modules(self) -> list[torch.nn.Module]:
        return [self.decoder]

    def use_cpu_bf16(self, on: bool) -> None:
        self.decoder.cpu_bf16 = on

    def use_chunk_graphs(self, on: bool, required: bool = False) -> None:
        self.chunk_graphs = GraphPool(self.decoder, self.decode_block_frames, required=required) if on else None

    def warm_chunk_graphs(self, sizes: list[int]) -> list[ChunkCapture]:
        return self.chunk_graphs.warm(sizes) if self.chunk_graphs is not None else []

    def decode(self, codes: Codes) -> np.ndarray:
        return ExactStreamDecoder(self.decoder, self.layout, self.device, self.decode_block_frames).push(codes)

    def streamer(self, mode: str = "exact", lookback: int = 8) -> StreamDecoder:
        check_mode(mode, lookback)
        if self.chunk_graphs is not None:
            if mode == "exact":
                return GraphedStreamDecoder(self.chunk_graphs, self.layout)
            return GraphedLookbackDecoder(self.chunk_graphs, self.layout, lookback)
        if mode == "exact":
            return ExactStreamDecoder(self.decoder, self.layout, self.device, self.decode_block_frames)
        return LookbackStreamDecoder(self.decode, self.layout, self.samples_per_frame, lookback)
