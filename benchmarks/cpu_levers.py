"""The issue-10 levers that were measured and not adopted, and the floors that rule them out.

benchmarks/cpu_realtime.py measures the paths the speed layer ships; this one measures what
was tried beside them, so every number in the README's "Real time on CPU" section has a command:

0. profile:    where a decode step of the fp16w talker goes (torch.profiler, 30 steps, 1 thread):
               the share of fbgemm's fp16 linear, and what the rest of the step costs.
1. bandwidth:  this machine's streaming read (a 1 GiB sum) on 1 and 2 threads, and fbgemm's
               fp16-weight GEMV on one 3584x1024 layer against it. The talker's floor at
               fp16-class weights is its backbone bytes / the 2-thread read bandwidth.
2. int8-guard: int8 weight-only weights (per output row, fp32 activations) simulated exactly by
               rounding the fp32 weights to int8 and back, on gate/up only and on every linear
               (fp16 elsewhere): the fidelity guard against fp32 over --guard-steps steps.
3. compile:    a decode step with transformers' StaticCache and torch.compile against the eager
               DynamicCache step, fp32 and fp16w, 1 thread (needs a C++ compiler for inductor).
4. kernels:    hand-written GEMVs with numba (int8 weight-only, bf16 bits, fp16 bits with the
               half-to-float conversion written out) and inductor's fp16-to-fp32 linear, each
               against fbgemm's fp16 GEMV; ONNX Runtime's convolutions against PyTorch's for the
               codec decoder's 92 Conv1d layers at one 10-frame push; and 1 row against 2 for the
               fp32 and fp16-weight linears (why CFG is nearly free only at fp16w). numba and onnxruntime
               come with the eval extras (librosa needs numba, Piper needs onnxruntime), not as
               project dependencies: a missing one is reported and its rows skipped.

Run: .venv/bin/python benchmarks/cpu_levers.py [--guard-steps 500] [--skip SECTION ...]
--quick: the tiny talker and codec, 2 layers, 64 MiB read, 10 guard steps, 3 rounds; no torch.compile.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.model.checkpoints.tiny import ensure_tiny  # noqa: E402
from gepard_demo.speed.fidelity import compare, trace  # noqa: E402
from gepard_demo.speed.quantize import apply_precision, backbone_bytes  # noqa: E402
from gepard_demo.model.request import FrameRequest  # noqa: E402
from quick import add_quick, codec_for, engine_for  # noqa: E402

warnings.filterwarnings("ignore")

TEXT = "The weather is sunny today, and the streets are full of people walking their dogs."
N, K = 3584, 1024  # one MLP projection of the real shape


def best_s(fn, rounds: int = 15) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def fp16w_layers(n: int = 8) -> nn.Module:
    """n fbgemm fp16-weight linears of one projection's shape (more bytes than the L3 cache)."""
    from torch.ao.quantization import float16_dynamic_qconfig, quantize_dynamic

    return quantize_dynamic(nn.Sequential(*[nn.Linear(K, N) for _ in range(n)]), {nn.Linear: float16_dynamic_qconfig},
                            dtype=torch.float16)


def real_shape_engine(quick: bool = False):
    return engine_for(quick, ensure_tiny(Path(tempfile.gettempdir()) / "gepard-bench-cache"))


# -- 0. profile -----------------------------------------------------------------------------------


def profile_section(engine, steps: int = 30) -> None:
    from torch.profiler import ProfilerActivity, profile

    from gepard_demo.settings import SamplingSettings

    torch.set_num_threads(1)
    apply_precision(engine.talker, "fp16w")
    with torch.no_grad():  # the stop head never fires: every run makes `steps` frames
        engine.talker.stop_head.weight.zero_()
        engine.talker.stop_head.bias.fill_(-30.0)
    settings = SamplingSettings(seed=0, max_frames=steps)
    list(engine.stream_frames(FrameRequest(TEXT, settings)))  # warm-up
    times = [f.elapsed_s for f in engine.stream_frames(FrameRequest(TEXT, settings))]
    step_ms = statistics.median(b - a for a, b in zip(times, times[1:])) * 1e3  # unprofiled, prefill excluded
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        list(engine.stream_frames(FrameRequest(TEXT, settings)))
    total = sum(e.self_cpu_time_total for e in prof.key_averages())
    share = sum(e.self_cpu_time_total for e in prof.key_averages() if e.key == "quantized::linear_dynamic_fp16") / total
    print(f"fp16w talker, 1 thread: {step_ms:.1f} ms a step; under the profiler fbgemm's fp16 linear takes {share:.0%} "
          f"of the time, so about {share * step_ms:.1f} ms a step, and the rest {(1 - share) * step_ms:.1f} ms\n", flush=True)


# -- 1. bandwidth ---------------------------------------------------------------------------------


def bandwidth_section(engine, quick: bool = False) -> None:
    x = torch.ones((16 if quick else 256) * 1024 * 1024)  # 1 GiB of fp32 (a quick run: 64 MiB)
    layers = fp16w_layers(2 if quick else 8)
    row = torch.randn(1, K)
    read = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        read[threads] = x.numel() * 4 / best_s(x.sum, 5) / 1e9
        with torch.inference_mode():
            gemv_s = best_s(lambda: [m(row) for m in layers], 3 if quick else 15) / len(layers)
        print(f"{threads} thread(s): streaming read {read[threads]:.1f} GB/s; fbgemm fp16 GEMV {gemv_s * 1e6:.0f} us a "
              f"{N}x{K} layer = {N * K * 2 / gemv_s / 1e9:.1f} GB/s")
    fp16_bytes = backbone_bytes(apply_precision(engine.talker, "fp16w"))
    print(f"talker backbone at fp16 weights: {fp16_bytes / 1e6:.0f} MB a step; at {read[2]:.1f} GB/s that is "
          f"{fp16_bytes / read[2] / 1e6:.1f} ms before anything else in the step\n", flush=True)


# -- 2. int8 weight-only against the guard ----------------------------------------------------------


def _int8_rows(w: torch.Tensor) -> torch.Tensor:
    """w rounded to int8 with one scale per output row, and back: what an int8 weight-only GEMV computes."""
    scale = w.abs().amax(1, keepdim=True) / 127
    return torch.round(w / scale).clamp(-127, 127) * scale


def int8_guard_section(engine, steps: int) -> None:
    torch.set_num_threads(2)
    talker = engine.talker
    prompt = engine.prompt_ids(TEXT)
    ref = trace(talker, prompt, steps, seed=0)
    linears = {n: m for n, m in talker.model.layers.named_modules() if isinstance(m, nn.Linear)}
    original = {n: m.weight.detach().clone() for n, m in linears.items()}
    print("| int8 weight-only (per row), fp16 elsewhere | mean KL | max KL | max abs dp_stop | argmax agree | guard |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for label, names in (("gate_proj + up_proj", ("gate_proj", "up_proj")), ("every linear", None)):
        with torch.no_grad():
            for n, m in linears.items():
                int8 = names is None or n.rsplit(".", 1)[-1] in names
                m.weight.copy_(_int8_rows(original[n]) if int8 else original[n].half().float())
        rep = compare(ref, trace(talker, prompt, steps, frames=ref.frames))
        print(f"| {label} | {rep.mean_kl:.2e} | {rep.max_kl:.2e} | {rep.max_dp_stop:.3f} | {rep.argmax_agreement:.1%} | "
              f"{'PASS' if rep.passes else 'FAIL'} |", flush=True)
    with torch.no_grad():
        for n, m in linears.items():
            m.weight.copy_(original[n])
    print()


# -- 3. static cache + compiled step ------------------------------------------------------------------


def _step_ms(talker, ids: torch.Tensor, cache, step, steps: int = 30) -> float:
    n = ids.shape[1]
    with torch.inference_mode():
        out = talker.model(inputs_embeds=talker.embed_prompt(ids), past_key_values=cache, use_cache=True,
                           position_ids=torch.arange(n)[None], cache_position=torch.arange(n))
        hidden = out.last_hidden_state[:, -1]
        times = []
        for i in range(steps):
            t = time.perf_counter()
            logits, _ = talker.head_logits(hidden)
            embeds = talker.embed_frame(logits.argmax(-1)).unsqueeze(1)
            hidden = step(embeds, torch.tensor([[n + i]]), torch.tensor([n + i]), cache)
            times.append(time.perf_counter() - t)
    return statistics.median(times[3:]) * 1e3


def compile_section(engine, precision: str) -> None:
    from transformers import DynamicCache, StaticCache

    torch.set_num_threads(1)
    talker = engine.talker
    apply_precision(talker, precision)
    ids = torch.tensor([engine.prompt_ids(TEXT)])
    cfg = talker.config.backbone

    def step(embeds, pos, cache_pos, cache):
        return talker.model(inputs_embeds=embeds, past_key_values=cache, use_cache=True, position_ids=pos,
                            cache_position=cache_pos).last_hidden_state[:, -1]

    eager = _step_ms(talker, ids, DynamicCache(config=cfg), step)
    compiled = torch.compile(step, dynamic=False)
    t = time.perf_counter()
    try:
        _step_ms(talker, ids, StaticCache(config=cfg, max_cache_len=ids.shape[1] + 40), compiled)  # compiles
    except Exception as e:  # noqa: BLE001  inductor needs a C++ compiler; say so and go on
        print(f"{precision}: torch.compile failed here ({type(e).__name__}: {str(e)[:200]})", flush=True)
        return
    compile_s = time.perf_counter() - t
    static = _step_ms(talker, ids, StaticCache(config=cfg, max_cache_len=ids.shape[1] + 40), compiled)
    print(f"{precision}, 1 thread: eager DynamicCache step {eager:.1f} ms; StaticCache + torch.compile {static:.1f} ms "
          f"(first run with compiling {compile_s:.0f} s)", flush=True)


# -- 4. kernels ----------------------------------------------------------------------------------


def numba_gemvs() -> dict | None:
    try:
        from numba import njit
    except ImportError:
        return None
    two112 = np.float32(2.0**112)

    @njit(fastmath=True, boundscheck=False, nogil=True)
    def int8_rows(x, w, scale, out):
        for n in range(w.shape[0]):
            acc = np.float32(0.0)
            for k in range(w.shape[1]):
                acc += x[k] * np.float32(w[n, k])
            out[n] = acc * scale[n]

    @njit(fastmath=True, boundscheck=False, nogil=True)
    def bf16_bits(x, w, out):
        for n in range(w.shape[0]):
            acc = np.float32(0.0)
            for k in range(w.shape[1]):
                acc += x[k] * np.uint32(np.uint32(w[n, k]) << np.uint32(16)).view(np.float32)
            out[n] = acc

    @njit(fastmath=True, boundscheck=False, nogil=True)
    def fp16_bits(x, w, out):  # numba has no CPU float16: the conversion, written out
        for n in range(w.shape[0]):
            acc = np.float32(0.0)
            for k in range(w.shape[1]):
                h = np.uint32(w[n, k])
                mag = np.uint32((h & np.uint32(0x7FFF)) << np.uint32(13)).view(np.float32) * two112
                acc += x[k] * mag * (np.float32(1.0) - np.float32(2.0) * np.float32(h >> np.uint32(15)))
            out[n] = acc

    return {"int8_rows": int8_rows, "bf16_bits": bf16_bits, "fp16_bits": fp16_bits}


def kernel_section(quick: bool = False) -> None:
    """A quick run: 2 layers, 3 rounds, no inductor row (its compile alone takes minutes), tiny's codec."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    layers = fp16w_layers(2 if quick else 8)
    rounds = 3 if quick else 15
    x = rng.standard_normal(K).astype(np.float32)
    out = np.zeros(N, np.float32)
    with torch.inference_mode():
        base = best_s(lambda: [m(torch.from_numpy(x)[None]) for m in layers], rounds) / len(layers)
    rows = [("fbgemm fp16 weights (the fp16w path)", base)]
    gemvs = numba_gemvs()
    if gemvs is None:
        print("numba not installed (pip install numba): its kernels skipped")
    else:
        w = [rng.standard_normal((N, K)).astype(np.float32) for _ in range(len(layers))]
        int8 = [np.clip(np.round(m * 40), -127, 127).astype(np.int8) for m in w]
        scale = np.full(N, 0.01, np.float32)
        bf16 = [(m.view(np.uint32) >> 16).astype(np.uint16) for m in w]
        fp16 = [m.astype(np.float16).view(np.uint16) for m in w]
        for name, fn, mats, extra in (("numba int8 weight-only (per-row scale)", gemvs["int8_rows"], int8, (scale,)),
                                      ("numba bf16 weights", gemvs["bf16_bits"], bf16, ()),
                                      ("numba fp16 weights (conversion written out)", gemvs["fp16_bits"], fp16, ())):
            rows.append((name, best_s(lambda: [fn(x, m, *extra, out) for m in mats], rounds) / len(mats)))

    if not quick:  # inductor's first compile takes minutes: not in a quick run
        class Fp16Linear(nn.Module):  # fp16 weights converted in the graph: does inductor fuse it?
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.randn(N, K).half(), requires_grad=False)

            def forward(self, v):
                return nn.functional.linear(v, self.w.float())

        stack = nn.ModuleList(Fp16Linear() for _ in range(len(layers)))
        compiled = torch.compile(lambda v: [m(v) for m in stack], dynamic=False)
        try:
            with torch.inference_mode():
                rows.append(("inductor: fp16 weights .float() then linear",
                             best_s(lambda: compiled(torch.from_numpy(x)[None])) / len(layers)))
        except Exception as e:  # noqa: BLE001  inductor needs a C++ compiler
            print(f"torch.compile failed here ({type(e).__name__}): the inductor row skipped")
    print(f"| one {N}x{K} layer, batch 1, 1 thread | us | x fbgemm fp16 |\n| --- | ---: | ---: |")
    for name, s in rows:
        print(f"| {name} | {s * 1e6:.0f} | {s / base:.2f} |")
    print(flush=True)
    rows_section(layers, rounds)
    codec_conv_ort(quick)


def rows_section(fp16w: nn.Module, rounds: int = 15) -> None:
    """1 row against 2 (a CFG step's two branches), 2 threads: is the second row free?"""
    torch.set_num_threads(2)
    fp32 = nn.Sequential(*[nn.Linear(K, N) for _ in range(len(fp16w))])
    print("| one layer, 2 threads | 1 row us | 2 rows us | ratio |\n| --- | ---: | ---: | ---: |")
    with torch.inference_mode():
        for name, layers in (("fp32 (MKL)", fp32), ("fbgemm fp16 weights", fp16w)):
            one, two = (best_s(lambda: [m(x) for m in layers], rounds) / len(layers)
                        for x in (torch.randn(1, K), torch.randn(2, K)))
            print(f"| {name} | {one * 1e6:.0f} | {two * 1e6:.0f} | {two / one:.2f} |")
    print(flush=True)


def codec_conv_ort(quick: bool = False) -> None:
    try:
        import onnxruntime as ort
    except ImportError:
        print("onnxruntime not installed (pip install onnxruntime onnx): the codec convolution comparison skipped")
        return
    torch.set_num_threads(1)
    codec = codec_for(quick)
    shapes = []
    hooks = [m.register_forward_hook(lambda m, inp, out: shapes.append((m, inp[0].shape)))
             for m in codec.decoder.modules() if isinstance(m, nn.Conv1d)]
    with torch.inference_mode():
        codec.decoder(torch.zeros(1, codec.layout.num_codes, 10), {})
    for h in hooks:
        h.remove()
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    torch_s = ort_s = 0.0
    for conv, shape in shapes:
        x = torch.randn(shape)
        with torch.inference_mode():
            torch_s += best_s(lambda: conv(x), 3)
            ref = conv(x).numpy()
        buf = io.BytesIO()
        torch.onnx.export(conv, (x,), buf, input_names=["x"], output_names=["y"], dynamo=False)
        session = ort.InferenceSession(buf.getvalue(), options, providers=["CPUExecutionProvider"])
        ort_s += best_s(lambda: session.run(None, {"x": x.numpy()}), 3)
        assert np.allclose(session.run(None, {"x": x.numpy()})[0], ref, atol=1e-3, rtol=1e-3)
    print(f"codec decoder, {len(shapes)} Conv1d layers at one 10-frame push, 1 thread: PyTorch {torch_s * 1e3:.0f} ms, "
          f"ONNX Runtime {ort_s * 1e3:.0f} ms ({ort_s / torch_s:.2f}x), same outputs\n", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--guard-steps", type=int, default=500)
    ap.add_argument("--skip", nargs="*", default=[], choices=["profile", "bandwidth", "int8-guard", "compile", "kernels"])
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:  # torch.compile's first run takes minutes: not a quick check
        args.guard_steps, args.skip = 10, [*args.skip, "compile"]
    print(f"# CPU levers, torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}\n")
    if "profile" not in args.skip:
        profile_section(real_shape_engine(args.quick), 8 if args.quick else 30)
    if "int8-guard" not in args.skip:
        int8_guard_section(real_shape_engine(args.quick), args.guard_steps)
    if "compile" not in args.skip:
        for precision in ("fp32", "fp16w"):
            compile_section(real_shape_engine(args.quick), precision)
        print()
    if "bandwidth" not in args.skip:
        bandwidth_section(real_shape_engine(args.quick), args.quick)
    if "kernels" not in args.skip:
        kernel_section(args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
