"""Convert a CTranslate2 Whisper model (model.bin) into an openai-whisper checkpoint.

Why: the only Whisper weights installable here are CTranslate2 folders (facts §8), while
openai-whisper, the reference implementation, loads a torch checkpoint
{"dims": ModelDimensions fields, "model_state_dict": ...}.

model.bin layout (little endian): uint32 format version, spec name (uint16 length + bytes),
uint32 spec revision, uint32 variable count, then per variable: name, uint8 rank, uint32 dims
x rank, uint8 dtype, uint32 byte count, raw data; then uint32 alias count and (alias, target)
name pairs. CTranslate2 fuses self-attention q/k/v into one Linear (`linear_0`, rows q;k;v)
and cross-attention k/v (`attention/linear_1`); openai-whisper keeps them apart and its key
projection has no bias (CTranslate2 stores zeros there).
"""

from __future__ import annotations

import os
import struct
import tempfile
from pathlib import Path

import numpy as np

# CTranslate2's DataType enum.
_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
_BF16 = 5


class ConversionError(ValueError):
    pass


def read_model_bin(path: str | Path) -> tuple[str, dict[str, np.ndarray]]:
    """(spec name, {variable name: array}) of a CTranslate2 model.bin; aliases resolved."""
    data = Path(path).read_bytes()
    pos = 0

    def take(fmt: str):
        nonlocal pos
        vals = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return vals

    def string() -> str:
        nonlocal pos
        (n,) = take("H")
        s = data[pos : pos + n].rstrip(b"\0").decode()
        pos += n
        return s

    (version,) = take("I")
    if version < 5:
        raise ConversionError(f"{path}: CTranslate2 model format {version} is too old (need >= 5)")
    spec = string()
    take("I")  # spec revision
    (count,) = take("I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(count):
        name = string()
        (rank,) = take("B")
        dims = take(f"{rank}I") if rank else ()
        dtype, nbytes = take("BI")
        raw = data[pos : pos + nbytes]
        pos += nbytes
        if dtype == _BF16:
            arr = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif dtype in _DTYPES:
            arr = np.frombuffer(raw, _DTYPES[dtype])
        else:
            raise ConversionError(f"{path}: variable {name} has unknown dtype {dtype}")
        variables[name] = arr.reshape(dims) if dims else arr.reshape(())
    (n_alias,) = take("I")
    for _ in range(n_alias):
        alias, target = string(), string()
        variables[alias] = variables[target]
    return spec, variables


def _f32(a: np.ndarray):
    import torch

    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def to_openai_state(variables: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """(dims, state_dict) for openai-whisper's Whisper module."""
    if any(k.endswith("weight_scale") for k in variables):
        raise ConversionError("quantized (int8) CTranslate2 weights cannot be converted; use a float16/float32 model")
    v = variables
    n_enc = 1 + max(int(k.split("/")[1][6:]) for k in v if k.startswith("encoder/layer_") and k.split("/")[1][6:].isdigit())
    n_dec = 1 + max(int(k.split("/")[1][6:]) for k in v if k.startswith("decoder/layer_") and k.split("/")[1][6:].isdigit())
    emb = v["decoder/embeddings/weight"]
    dims = {
        "n_mels": int(v["encoder/conv1/weight"].shape[1]),
        "n_audio_ctx": int(v["encoder/position_encodings/encodings"].shape[0]),
        "n_audio_state": int(v["encoder/conv1/weight"].shape[0]),
        "n_audio_head": int(v["encoder/num_heads"]),
        "n_audio_layer": n_enc,
        "n_vocab": int(emb.shape[0]),
        "n_text_ctx": int(v["decoder/position_encodings/encodings"].shape[0]),
        "n_text_state": int(emb.shape[1]),
        "n_text_head": int(v["decoder/num_heads"]),
        "n_text_layer": n_dec,
    }
    sd: dict = {}

    def linear(dst: str, src: str, bias: bool = True):
        sd[f"{dst}.weight"] = _f32(v[f"{src}/weight"])
        if bias:
            sd[f"{dst}.bias"] = _f32(v[f"{src}/bias"])

    def norm(dst: str, src: str):
        sd[f"{dst}.weight"] = _f32(v[f"{src}/gamma"])
        sd[f"{dst}.bias"] = _f32(v[f"{src}/beta"])

    def fused(dst: str, src: str, names: list[str]):
        w = np.split(v[f"{src}/weight"], len(names), axis=0)
        b = np.split(v[f"{src}/bias"], len(names), axis=0)
        for name, wi, bi in zip(names, w, b):
            sd[f"{dst}.{name}.weight"] = _f32(wi)
            if name != "key":  # openai-whisper's key projection has no bias
                sd[f"{dst}.{name}.bias"] = _f32(bi)

    for side in ("encoder", "decoder"):
        n_layers = n_enc if side == "encoder" else n_dec
        for i in range(n_layers):
            s, d = f"{side}/layer_{i}", f"{side}.blocks.{i}"
            norm(f"{d}.attn_ln", f"{s}/self_attention/layer_norm")
            fused(f"{d}.attn", f"{s}/self_attention/linear_0", ["query", "key", "value"])
            linear(f"{d}.attn.out", f"{s}/self_attention/linear_1")
            if side == "decoder":
                norm(f"{d}.cross_attn_ln", f"{s}/attention/layer_norm")
                linear(f"{d}.cross_attn.query", f"{s}/attention/linear_0")
                fused(f"{d}.cross_attn", f"{s}/attention/linear_1", ["key", "value"])
                linear(f"{d}.cross_attn.out", f"{s}/attention/linear_2")
            norm(f"{d}.mlp_ln", f"{s}/ffn/layer_norm")
            linear(f"{d}.mlp.0", f"{s}/ffn/linear_0")
            linear(f"{d}.mlp.2", f"{s}/ffn/linear_1")
    linear("encoder.conv1", "encoder/conv1")
    linear("encoder.conv2", "encoder/conv2")
    sd["encoder.positional_embedding"] = _f32(v["encoder/position_encodings/encodings"])
    norm("encoder.ln_post", "encoder/layer_norm")
    sd["decoder.token_embedding.weight"] = _f32(emb)
    sd["decoder.positional_embedding"] = _f32(v["decoder/position_encodings/encodings"])
    norm("decoder.ln", "decoder/layer_norm")
    return dims, sd


def convert(ct2_dir: str | Path, out_path: str | Path) -> Path:
    """Write the openai-whisper checkpoint for a CTranslate2 folder (atomic: tmp + replace)."""
    import torch

    spec, variables = read_model_bin(Path(ct2_dir) / "model.bin")
    if spec != "WhisperSpec":
        raise ConversionError(f"{ct2_dir}: model.bin holds a {spec}, not a WhisperSpec")
    dims, sd = to_openai_state(variables)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_path.parent, suffix=".tmp")
    os.close(fd)
    try:
        torch.save({"dims": dims, "model_state_dict": sd}, tmp)
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out_path
