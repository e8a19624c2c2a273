"""Talker speed, side by side in one run (CPU).

1. Per-frame cost of the whole generation loop (sampling, stop head, frame embedding, cache
   bookkeeping) against a bare backbone decode step with the same cache length, for the tiny
   model and for a full-size random model with Gepard-1.0's backbone shapes (built in memory).
   Target: the loop adds at most 15% to the bare step at full size.
2. Frames per second of a batch of 8 against a batch of 1 on the tiny model.
   Target: at least 4x.

The stop head is forced off so every run makes exactly the frames asked for.
Run: .venv/bin/python benchmarks/talker_step.py [--frames 64] [--rounds 3] [--threads 1] [--skip-full]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gepard_demo.config import GepardConfig  # noqa: E402
from gepard_demo.engine import GepardEngine, ModelInfo  # noqa: E402
from gepard_demo.settings import SamplingSettings  # noqa: E402
from gepard_demo.talker import GepardTalker  # noqa: E402
from gepard_demo.tiny import ensure_tiny  # noqa: E402
from transformers import AutoTokenizer, DynamicCache  # noqa: E402

TEXT = "The weather is sunny today, with a light breeze from the west."
# Gepard-1.0's backbone (facts §1).
FULL_BACKBONE = dict(
    model_type="qwen3_5_text", vocab_size=248320, hidden_size=1024, intermediate_size=3584,
    num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=2, head_dim=256,
    linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128,
    linear_value_head_dim=128, linear_conv_kernel_dim=4, max_position_embeddings=32768,
    rope_parameters={"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25},
)


def silence_stop_head(engine: GepardEngine) -> None:
    with torch.no_grad():
        engine.talker.stop_head.weight.zero_()
        engine.talker.stop_head.bias.fill_(-30.0)


def loop_step_s(engine: GepardEngine, frames: int) -> float:
    """Median seconds between consecutive steps of the real loop (prefill excluded)."""
    settings = SamplingSettings(seed=0, max_frames=frames, stop_threshold=0.5)
    times = [s.elapsed_s for s in engine.stream_frames(TEXT, settings)]
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def bare_step_s(engine: GepardEngine, frames: int) -> float:
    """Median seconds of a bare backbone decode step: same prompt, same cache growth."""
    talker = engine.talker
    ids = torch.tensor([engine.prompt_ids(TEXT)])
    cache = DynamicCache(config=talker.config.backbone)
    x = torch.randn(1, 1, talker.config.hidden_size)
    with torch.inference_mode():
        talker.model(inputs_embeds=talker.embed_prompt(ids), past_key_values=cache, use_cache=True)
        pos = ids.shape[1]
        steps = []
        for _ in range(frames - 1):
            t = time.perf_counter()
            out = talker.model(inputs_embeds=x, position_ids=torch.tensor([[pos]]), past_key_values=cache, use_cache=True)
            out.last_hidden_state[:, -1].sum().item()
            steps.append(time.perf_counter() - t)
            pos += 1
    return statistics.median(steps)


def full_size_engine(tokenizer_dir: Path) -> GepardEngine:
    config = GepardConfig.from_dicts(FULL_BACKBONE, {})
    talker = GepardTalker(config).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    info = ModelInfo("full-size-random", "(in memory)", None, True, "cpu", "float32")
    return GepardEngine(config, tokenizer, talker, info)


def frames_per_s(engine: GepardEngine, batch: int, frames: int) -> float:
    texts = [TEXT] * batch
    settings = [SamplingSettings(seed=i, max_frames=frames) for i in range(batch)]
    t = time.perf_counter()
    results = engine.generate(texts, settings)
    return sum(r.num_frames for r in results) / (time.perf_counter() - t)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--full-frames", type=int, default=24, help="frames per run at full size")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved bare/loop rounds")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-full", action="store_true", help="tiny model only (fast)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    cache = Path(tempfile.gettempdir()) / "gepard-bench-cache"
    tiny = GepardEngine.load("tiny", cache_dir=cache)
    silence_stop_head(tiny)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, frames per run {args.frames}")

    rows = [("tiny", tiny)]
    if not args.skip_full:
        t = time.perf_counter()
        full = full_size_engine(ensure_tiny(cache))
        silence_stop_head(full)
        print(f"built full-size random talker in {time.perf_counter() - t:.1f} s "
              f"({sum(p.numel() for p in full.talker.parameters()) / 1e6:.0f} M parameters)")
        rows.append(("full-size", full))

    print("\n| model | bare backbone step | whole loop step | loop overhead (median of rounds) | target |")
    print("| --- | ---: | ---: | ---: | --- |")
    ok = True
    for name, engine in rows:
        loop_step_s(engine, 8)  # warm-up
        # Interleaved rounds, so a burst of load on this noisy machine hits both sides alike.
        frames = args.frames if name == "tiny" else args.full_frames
        pairs = [(bare_step_s(engine, frames), loop_step_s(engine, frames)) for _ in range(args.rounds)]
        bare = statistics.median(b for b, _ in pairs)
        loop = statistics.median(lp for _, lp in pairs)
        over = statistics.median(lp / b for b, lp in pairs) - 1
        target = "<= 15%" if name == "full-size" else "(info)"
        ok &= name != "full-size" or over <= 0.15
        print(f"| {name} | {bare * 1e3:.2f} ms | {loop * 1e3:.2f} ms | {over * 100:+.1f}% | {target} |")

    frames_per_s(tiny, 1, 8)  # warm-up
    one, eight = frames_per_s(tiny, 1, args.frames), frames_per_s(tiny, 8, args.frames)
    ok &= eight / one >= 4
    print("\n| tiny model | frames/s | ratio | target |\n| --- | ---: | ---: | --- |")
    print(f"| batch 1 | {one:.0f} | 1.00x | |")
    print(f"| batch 8 | {eight:.0f} | {eight / one:.2f}x | >= 4x |")
    print("\nall targets met" if ok else "\nTARGET MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
