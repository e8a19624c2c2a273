"""Real time on a small CPU: every speed path side by side in one run, ratios to fp32 (issue 10).

On the real-shape random Gepard (gepard_demo.model.checkpoints.full_size: 14 full-attention layers, hidden 1024, 8/2 heads, head_dim 256,
intermediate 3584, vocab 248320) and the full-size random NanoCodec, 2 threads unless said:

1. kernels:  one 3584x1024 linear at batch 1 (a set of weights larger than the L3 cache, so
             memory traffic counts): fp32, bf16, fbgemm fp16-weight, dynamic int8, weight-only
             int8 and int4.
2. guard:    teacher-forced fidelity against fp32 over --guard-steps steps (default 500):
             mean per-head KL <= 0.01 nats, |dp_stop| <= 0.01, argmax agreement (info).
3. talker:   whole-loop step time per precision (2 threads, and 1 thread for the pipeline).
             Target: <= 20 ms at batch 1.
4. codec:    exact streaming in the app's 10-frame pushes, ms per frame; SNR of each variant vs
             the fp32 decode. Target: <= 15 ms per frame, fast variants >= 40 dB.
5. e2e:      a --e2e-frames utterance (430 = 20 s) through SynthesisSession with the app's stream
             settings, codec included: RTF, time to first audio, playback gaps (a chunk that is
             ready after the moment a player started at the first chunk would reach it).
             Target: RTF <= 0.8, no gaps.

Variants are interleaved within each section so load on this shared machine hits all alike.
Run: flock /tmp/gepard-heavy.lock .venv/bin/python benchmarks/cpu_realtime.py
     [--guard-steps 500] [--talker-frames 24] [--e2e-frames 430] [--rounds 2] [--skip SECTION ...]
--quick: 2 weight copies, the tiny talker and codec, 8 guard steps, 6/20/20 frames, 1 round.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.codec.hifigan import CausalConvTranspose  # noqa: E402
from gepard_demo.codec.stream import ExactStreamDecoder  # noqa: E402
from gepard_demo.model.engine import GepardEngine, ModelInfo  # noqa: E402
from gepard_demo.model.talker import GepardTalker  # noqa: E402
from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.settings import SamplingSettings, StreamSettings  # noqa: E402
from gepard_demo.speed.fidelity import compare, snr_db, trace  # noqa: E402
from gepard_demo.speed.pipeline import PipelinedEngine  # noqa: E402
from gepard_demo.speed.quantize import apply_precision, backbone_bytes  # noqa: E402
from gepard_demo.speed.select import detect_hardware  # noqa: E402
from gepard_demo.streaming.session import SynthesisSession  # noqa: E402
from gepard_demo.streaming.seams import SessionRequest  # noqa: E402
from gepard_demo.model.request import FrameRequest  # noqa: E402
from quick import add_quick, codec_for, engine_for  # noqa: E402

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)

TEXT = "The weather is sunny today, with a light breeze from the west and a few clouds later on."
FRAME_S = 1024 / 22050
APP_STREAM = StreamSettings(first_chunk_frames=10, chunk_frames=10, decode_mode="exact")  # app.py's DEMO_STREAM
def variant(engine: GepardEngine, precision: str) -> GepardEngine:
    """A copy of the engine at `precision`; the fp32 token embedding (1 GB) is shared, not copied."""
    emb = engine.talker.model.embed_tokens.weight
    talker = copy.deepcopy(engine.talker, memo={id(emb): emb})
    if precision == "bf16":  # .to() would convert the shared tensor in place: give it its own
        talker.model.embed_tokens.weight = torch.nn.Parameter(emb.detach().to(torch.bfloat16), requires_grad=False)
    apply_precision(talker, precision)
    info = ModelInfo(f"real-shape-{precision}", "(in memory)", None, True, "cpu", "float32")
    return GepardEngine(engine.config, engine.tokenizer, talker, info)


def silence_stop_head(talker: GepardTalker) -> None:
    with torch.no_grad():
        talker.stop_head.weight.zero_()
        talker.stop_head.bias.fill_(-30.0)


def table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("| " + " | ".join("---" if i == 0 else "---:" for i in range(len(header))) + " |")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(flush=True)


# -- 1. kernels --------------------------------------------------------------------------------


def kernel_section(reps: int, copies: int) -> None:
    n, k = 3584, 1024  # 16 fp32 copies = 235 MB, past any L3
    gen = torch.Generator().manual_seed(0)
    ws = [torch.randn(n, k, generator=gen) / 32 for _ in range(copies)]
    x = torch.randn(1, k, generator=gen)
    ops: dict[str, list] = {"fp32": [(lambda w=w: torch.nn.functional.linear(x, w)) for w in ws]}
    xb = x.bfloat16()
    ops["bf16"] = [(lambda w=w.bfloat16(): torch.nn.functional.linear(xb, w)) for w in ws]
    dyn = []
    for w in ws:
        lin = torch.nn.Linear(k, n, bias=False)
        lin.weight.data = w
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        q = quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)
        dyn.append(lambda q=q: q(x))
    ops["int8 dynamic (fbgemm)"] = dyn
    f16 = []
    for w in ws:
        packed16 = torch.fbgemm_pack_gemm_matrix_fp16(w)
        f16.append(lambda p=packed16: torch.fbgemm_linear_fp16_weight_fp32_activation(x, p, torch.zeros(n)))
    ops["fp16 weight, fp32 math (fbgemm)"] = f16
    wo8 = []
    for w in ws:
        scale = w.abs().amax(1) / 127
        w8 = (w / scale[:, None]).round().clamp(-128, 127).to(torch.int8)
        wo8.append(lambda w8=w8, s=scale: torch.ops.aten._weight_int8pack_mm(x, w8, s))
    ops["int8 weight-only"] = wo8
    wo4, gs = [], 128
    for w in ws:
        g = w.reshape(n, k // gs, gs)
        lo, hi = g.amin(-1, keepdim=True), g.amax(-1, keepdim=True)
        sc = (hi - lo).clamp(min=1e-6) / 15
        q4 = ((g - lo) / sc).round().clamp(0, 15).to(torch.int32).reshape(n, k)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(q4, 1)
        sz = torch.stack([sc.squeeze(-1).t(), (lo + 8 * sc).squeeze(-1).t()], -1).contiguous()
        wo4.append(lambda p=packed, sz=sz: torch.ops.aten._weight_int4pack_mm_for_cpu(x, p, gs, sz))
    ops["int4 weight-only (group 128)"] = wo4
    times: dict[str, list[float]] = {name: [] for name in ops}
    ref = [f() for f in ops["fp32"]]
    errs = {name: max(float((f() - r).norm() / r.norm()) for f, r in zip(fs, ref)) for name, fs in ops.items()}
    for _ in range(reps):
        for name, fs in ops.items():
            for f in fs[:2]:
                f()  # warm
            t = time.perf_counter()
            for f in fs:
                f()
            times[name].append((time.perf_counter() - t) / len(fs))
    base = min(times["fp32"])
    print("## 1. Kernels: one 3584x1024 linear, batch 1 (best of rounds)\n")
    table(["kernel", "us", "x fp32 time", "rel. error vs fp32"],
          [[name, f"{min(t) * 1e6:.0f}", f"{min(t) / base:.2f}", f"{errs[name]:.1e}"] for name, t in times.items()])


# -- 2. fidelity guard ---------------------------------------------------------------------------


def guard_section(fp32: GepardEngine, fast: dict[str, GepardEngine], steps: int) -> dict[str, bool]:
    torch.set_num_threads(1)  # the numbers do not depend on it; one thread is steadiest on a busy box
    prompt = fp32.prompt_ids(TEXT)
    t = time.perf_counter()
    ref = trace(fp32.talker, prompt, steps, seed=0)
    ref_s = time.perf_counter() - t
    rows, verdicts = [], {}
    for name, engine in fast.items():
        rep = compare(ref, trace(engine.talker, prompt, steps, frames=ref.frames))
        verdicts[name] = rep.passes
        rows.append([name, f"{rep.mean_kl:.2e}", f"{rep.max_kl:.2e}", f"{rep.max_dp_stop:.2e}", f"{rep.mean_dp_stop:.1e}",
                     f"{rep.argmax_agreement * 100:.1f}%", "PASS" if rep.passes else "FAIL"])
    print(f"## 2. Fidelity guard: {steps} teacher-forced steps vs fp32 (reference trace {ref_s:.0f} s; "
          f"mean p_stop {float(ref.p_stop.mean()):.2f})\n")
    table(["precision", "mean KL (nats)", "max KL", "max |dp_stop|", "mean |dp_stop|", "argmax agree", "<= 0.01 / <= 0.01"], rows)
    return verdicts


# -- 3. talker step ------------------------------------------------------------------------------


def loop_steps(engine: GepardEngine, frames: int) -> list[float]:
    settings = SamplingSettings(seed=0, max_frames=frames, temperature=0.3)
    times = [s.elapsed_s for s in engine.stream_frames(FrameRequest(TEXT, settings))]
    return [b - a for a, b in zip(times, times[1:])]


def talker_section(engines: dict[str, GepardEngine], frames: int, rounds: int, threads: list[int]) -> dict:
    results = {}
    for n in threads:
        torch.set_num_threads(n)
        for e in engines.values():
            loop_steps(e, 4)  # warm-up at this thread count
        per = {name: [] for name in engines}
        for _ in range(rounds):
            for name, e in engines.items():
                per[name].extend(loop_steps(e, frames))
        for name, steps in per.items():
            results[(name, n)] = (statistics.median(steps), min(steps))
    base = {n: results[("fp32", n)][0] for n in threads}
    rows = []
    for (name, n), (med, best) in results.items():
        ok = "met" if med <= 0.020 else "not met"
        rows.append([f"{name}, {n} thread{'s' if n > 1 else ''}", f"{backbone_bytes(engines[name].talker) / 1e6:.0f}",
                     f"{med * 1e3:.1f}", f"{best * 1e3:.1f}", f"{med / base[n]:.2f}", f"{FRAME_S / med:.2f}x", ok])
    print(f"## 3. Talker: whole decode-loop step at batch 1 ({frames} frames x {rounds} rounds, interleaved)\n")
    table(["variant", "backbone MB/step", "median ms", "best ms", "x fp32", "speed vs real time", "<= 20 ms"], rows)
    return results


# -- 4. codec ------------------------------------------------------------------------------------


class CastDecoder(torch.nn.Module):
    """The decoder run in another dtype: same state carrying, so exact streaming stays exact."""

    def __init__(self, decoder: torch.nn.Module, dtype: torch.dtype):
        super().__init__()
        self.inner = copy.deepcopy(decoder).to(dtype)
        self.dtype = dtype
        self.samples_per_frame = decoder.samples_per_frame

    def forward(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        return self.inner(x.to(self.dtype), state).float()


def stream_decode(decoder, codec, codes: np.ndarray, push: int) -> tuple[np.ndarray, float]:
    dec = ExactStreamDecoder(decoder, codec.layout, codec.device)
    t = time.perf_counter()
    out = [dec.push(codes[i : i + push]) for i in range(0, len(codes), push)]
    return np.concatenate(out), time.perf_counter() - t


def codec_macs_per_frame(codec, frames: int = 10) -> float:
    """Multiply-adds per frame of the decoder's convolutions (the compute floor of the codec)."""
    macs = []

    def hook(module, inputs, output):
        if isinstance(module, CausalConvTranspose):  # each input sample meets the whole kernel
            w = module.conv.weight  # (cin, cout / groups, k)
            macs.append(inputs[0].shape[-1] * w.shape[0] * w.shape[1] * w.shape[2])
        else:
            w = module.weight  # (cout, cin / groups, k)
            macs.append(output.shape[-1] * w.shape[0] * w.shape[1] * w.shape[2])

    kinds = (torch.nn.Conv1d, CausalConvTranspose)
    handles = [m.register_forward_hook(hook) for m in codec.decoder.modules() if isinstance(m, kinds)]
    try:
        with torch.inference_mode():
            codec.decoder(torch.zeros(1, codec.layout.num_codes, frames), {})
    finally:
        for h in handles:
            h.remove()
    return sum(macs) / frames


def codec_section(codec, frames: int, rounds: int) -> None:
    rng = np.random.default_rng(0)
    codes = np.stack([rng.integers(0, lv, frames) for lv in codec.layout.levels], axis=1)
    variants = {
        "fp32, 1 thread": (codec.decoder, 1),
        "fp32, 2 threads": (codec.decoder, 2),
        "bf16, 1 thread": (CastDecoder(codec.decoder, torch.bfloat16), 1),
    }
    reference = codec.decode(codes)
    per = {name: [] for name in variants}
    audio = {}
    for _ in range(rounds):
        for name, (decoder, n) in variants.items():
            torch.set_num_threads(n)
            stream_decode(decoder, codec, codes[:10], 10)  # warm-up
            audio[name], secs = stream_decode(decoder, codec, codes, 10)
            per[name].append(secs / frames)
    base = statistics.median(per["fp32, 1 thread"])
    rows = []
    for name, ts in per.items():
        med = statistics.median(ts)
        snr = snr_db(reference, audio[name])
        rows.append([name, f"{med * 1e3:.1f}", f"{min(ts) * 1e3:.1f}", f"{med / base:.2f}", f"{snr:.1f}" if np.isfinite(snr) else "exact",
                     "met" if med <= 0.015 else "not met"])
    gmacs = codec_macs_per_frame(codec) / 1e9
    print(f"## 4. Codec: exact streaming in 10-frame pushes, {frames} frames x {rounds} rounds "
          f"({gmacs:.2f} G multiply-adds per frame; fp32 1 thread reaches {2 * gmacs / base:.0f} GFLOP/s)\n")
    table(["variant", "median ms/frame", "best ms/frame", "x fp32 1 thread", "SNR vs fp32 (dB)", "<= 15 ms"], rows)


# -- 5. end to end -------------------------------------------------------------------------------


def playback_gaps(chunks, tolerance_s: float = 0.02) -> tuple[int, float]:
    """A player that starts at the first chunk plays chunk k at ttfa + start_s(k); count the
    chunks that are not ready by then, and the total stall."""
    start = next(c.wall_s for c in chunks if len(c.samples))
    clock, gaps, stall = start, 0, 0.0
    for c in chunks:
        if not len(c.samples):
            continue
        if c.wall_s > clock + tolerance_s:
            gaps += 1
            stall += c.wall_s - clock
            clock = c.wall_s
        clock += c.duration_s
    return gaps, stall


def e2e_section(engines: dict[str, object], codec, frames: int) -> None:
    rows = []
    base = None
    for name, (engine, threads) in engines.items():
        torch.set_num_threads(threads)
        settings = SamplingSettings(seed=0, max_frames=frames, temperature=0.3)
        SynthesisSession(
            engine, codec, SessionRequest(TEXT, settings.replace(max_frames=12), APP_STREAM)
        ).run()  # warm-up
        session = SynthesisSession(engine, codec, SessionRequest(TEXT, settings, APP_STREAM))
        chunks = list(session)
        st = session.stats
        gaps, stall = playback_gaps(chunks)
        base = base or st.rtf
        rows.append([name, f"{st.speech_s:.1f}", f"{st.rtf:.2f}", f"{st.rtf / base:.2f}", f"{st.ttfa_s * 1e3:.0f}",
                     f"{gaps} ({stall:.1f} s)", "met" if st.rtf <= 0.8 else "not met", "met" if gaps == 0 else "not met"])
    print(f"## 5. End to end: {frames} frames through SynthesisSession (chunks 10/10, exact codec)\n")
    table(["variant", "speech s", "RTF", "x fp32", "first audio ms", "gaps (stall)", "RTF <= 0.8", "no gaps"], rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--guard-steps", type=int, default=500)
    ap.add_argument("--talker-frames", type=int, default=24)
    ap.add_argument("--codec-frames", type=int, default=60)
    ap.add_argument("--e2e-frames", type=int, default=430)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--skip", nargs="*", default=[], choices=["kernels", "guard", "talker", "codec", "e2e"])
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.guard_steps, args.talker_frames, args.codec_frames, args.e2e_frames, args.rounds = 8, 6, 20, 20, 1
    torch.set_num_threads(2)
    hw = detect_hardware("cpu")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# CPU real time, torch {torch.__version__}; {hw.describe()}; torch CPU capability "
          f"{torch.backends.cpu.get_cpu_capability()}; load avg at start {load:.1f}\n")
    if "kernels" not in args.skip:
        kernel_section(reps=1 if args.quick else 3, copies=2 if args.quick else 16)

    t = time.perf_counter()
    cache = Path(tempfile.gettempdir()) / "gepard-bench-cache"
    fp32 = engine_for(args.quick, ensure_tiny(cache))
    print(f"built the {'tiny' if args.quick else 'real-shape random'} talker in {time.perf_counter() - t:.0f} s "
          f"({sum(p.numel() for p in fp32.talker.parameters()) / 1e6:.0f} M parameters)\n", flush=True)
    fast = {p: variant(fp32, p) for p in ("fp16w", "int8", "bf16")}
    if "guard" not in args.skip:
        guard_section(fp32, fast, args.guard_steps)
    for e in (fp32, *fast.values()):
        silence_stop_head(e.talker)  # every timed run makes exactly the frames asked for
    if "talker" not in args.skip:
        talker_section({"fp32": fp32, **fast}, args.talker_frames, args.rounds, [2, 1])
    del fast["bf16"]  # slow without native bf16 math; not in the end-to-end runs
    codec = codec_for(args.quick)
    if "codec" not in args.skip:
        codec_section(codec, args.codec_frames, args.rounds)
    if "e2e" not in args.skip:
        e2e_section({
            "fp32, serial, 2 threads (before)": (fp32, 2),
            "fp16w, pipelined, 1 thread each": (PipelinedEngine(fast["fp16w"]), 1),
            "int8+fp16, pipelined, 1 thread each": (PipelinedEngine(fast["int8"]), 1),
            "int8+fp16, pipelined, 2 threads each": (PipelinedEngine(fast["int8"]), 2),
        }, codec, args.e2e_frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
