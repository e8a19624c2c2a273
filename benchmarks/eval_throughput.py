"""Evaluation throughput on this machine.

1. End to end on the tiny checkpoint: `eval run` (synthesis, codec decode, WAVs) + scoring
   with faster-whisper tiny.en -> utterances per minute.
2. ASR cost: CPU seconds (process time, all threads) per audio second, for every backend x
   bundled Whisper size, on real speech (Piper), VAD on, greedy.
3. Batched vs sequential synthesis on tiny: the same utterances and seeds, batch N vs 1.
4. The audio measures (eval/runs/measure.py) on the same speech: VAD timing + F0 + the frame loop
   detector, and DNSMOS apart, in CPU seconds per audio second (target: <= 0.1 on top of ASR;
   DNSMOS is on by default whatever it costs, eval/runs/measure.py); SwiftF0's F0 medians against
   librosa.pyin's.

    python benchmarks/eval_throughput.py [--utts 8] [--max-frames 40] [--out runs/bench-eval]
--quick: 2 utterances of 8 frames; ASR cost of each backend at the smallest bundled size only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from eval.engines.local import GepardLocal  # noqa: E402
from eval.engines.piper import PiperReference  # noqa: E402
from eval.engines.request import SynthesisItem  # noqa: E402
from eval.runs.run import RunConfig, run  # noqa: E402
from eval.runs.score import score  # noqa: E402
from eval.runs.seeds import utterance_seed  # noqa: E402
from eval.runs.sets import load_set  # noqa: E402
from eval.scoring.asr import ASRSettings, Transcriber  # noqa: E402
from eval.scoring.audio import read_mono  # noqa: E402
from gepard_demo.alignment.weights import bundled_sizes  # noqa: E402
from gepard_demo.settings import SamplingSettings, StreamSettings  # noqa: E402
from quick import add_quick  # noqa: E402


def spread(items, n):
    """n utterances taken round-robin over the categories (short and long sentences alike)."""
    by_cat: dict = {}
    for u in items:
        by_cat.setdefault(u.category, []).append(u)
    out, i = [], 0
    while len(out) < n:
        for cat in by_cat.values():
            if i < len(cat) and len(out) < n:
                out.append(cat[i])
        i += 1
    return out


def measures_cost(audios, words, audio_s: float) -> dict:
    """CPU seconds per audio second of the failure table's measures (VAD timing, F0, the codes'
    loop detector) and, apart, of DNSMOS; and SwiftF0 against librosa.pyin, the tracker it
    replaced (medians of the voiced F0 of each clip)."""
    import librosa
    import numpy as np

    from eval.scoring.audio import to_16k
    from eval.scoring.loops import frame_loop
    from eval.scoring.naturalness import dnsmos
    from eval.scoring.timing import SpeechTiming

    clips = [to_16k(a, sr) for a, sr in audios]
    timing = SpeechTiming()
    timing.measure(clips[0], words[0])  # warm-up: the VAD and pitch sessions
    rng = np.random.default_rng(0)
    c0 = time.process_time()
    for (a, sr), clip, w in zip(audios, clips, words):
        timing.measure(clip, w)
        frame_loop(rng.integers(0, 6, size=(int(len(a) / 1024), 32)), a, sr)  # as many frames as the clip
    measures = (time.process_time() - c0) / audio_s
    dnsmos(clips[0])
    c0 = time.process_time()
    for clip in clips:
        dnsmos(clip)
    dns = (time.process_time() - c0) / audio_s
    c0 = time.process_time()
    pyin = [librosa.pyin(c, fmin=60, fmax=500, sr=16000, frame_length=1024, hop_length=256) for c in clips]
    pyin_s = (time.process_time() - c0) / audio_s
    swift = [timing.measure(c, w)["f0_median_hz"] for c, w in zip(clips, words)]
    pyin_med = [float(np.nanmedian(f[v])) if v.any() else None for f, v, _ in pyin]
    diffs = [abs(a - b) for a, b in zip(swift, pyin_med) if a is not None and b is not None]
    return {"measures_cpu_s_per_audio_s": measures, "target_measures": 0.1,
            "dnsmos_cpu_s_per_audio_s": dns,
            "pyin_cpu_s_per_audio_s": pyin_s, "f0_median_abs_diff_hz_swift_vs_pyin": {
                "median": float(np.median(diffs)) if diffs else None, "max": max(diffs, default=None), "clips": len(diffs)}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--utts", type=int, default=8)
    ap.add_argument("--max-frames", type=int, default=40)
    ap.add_argument("--out", default="runs/bench-eval")
    ap.add_argument("--model-cache", default=None)
    add_quick(ap)
    args = ap.parse_args()
    if args.quick:
        args.utts, args.max_frames = 2, 8
    torch.set_num_threads(1)
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    results: dict = {"utts": args.utts, "max_frames": args.max_frames}

    gepard = GepardLocal.load("tiny", cache_dir=args.model_cache)
    sampling = SamplingSettings(max_frames=args.max_frames)
    items = spread(load_set("core"), args.utts)
    out.mkdir(parents=True)
    set_file = out / "bench.jsonl"
    set_file.write_text("".join(json.dumps({"id": u.id, "text": u.text, "category": u.category}) + "\n" for u in items))

    # 1. end to end
    t0 = time.perf_counter()
    cfg = RunConfig(set=str(set_file), sampling=sampling, batch_size=args.utts)
    run(cfg, out / "e2e", engine=gepard, log=lambda m: None)
    t_synth = time.perf_counter() - t0
    score(out / "e2e", ASRSettings(), log=lambda m: None)
    t_all = time.perf_counter() - t0
    results["e2e"] = {"utt_per_min": 60 * args.utts / t_all, "synth_s": t_synth, "total_s": t_all,
                      "note": "tiny random weights: every utterance runs to max_frames"}

    # 3. batched vs sequential (same seeds)
    reqs = [SynthesisItem(u.text, utterance_seed(1, u.id)) for u in items]
    times = {}
    for bs in (1, args.utts):
        t0 = time.perf_counter()
        for i in range(0, len(reqs), bs):
            gepard.synthesize(reqs[i : i + bs], sampling, StreamSettings())
        times[bs] = time.perf_counter() - t0
    results["batching"] = {"sequential_s": times[1], f"batch{args.utts}_s": times[args.utts],
                           "speedup": times[1] / times[args.utts]}

    # 2. ASR cost on real speech
    piper = PiperReference.load()
    run(RunConfig(engine="piper", model="en_US-joe-medium", set=str(set_file)), out / "piper", engine=piper,
        log=lambda m: None)
    rows = [json.loads(l) for l in (out / "piper" / "rows.jsonl").read_text().splitlines()]
    audios = [read_mono(out / "piper" / r["wav"]) for r in rows]
    audio_s = sum(len(a) / sr for a, sr in audios)
    asr = {}
    for backend in ("faster-whisper", "openai-whisper"):
        for size in bundled_sizes()[:1] if args.quick else bundled_sizes():
            tr = Transcriber(ASRSettings(backend=backend, model=size, threads=2))
            tr.transcribe(*audios[0])  # warm-up (first-call setup is not throughput)
            c0, w0 = time.process_time(), time.perf_counter()
            for a, sr in audios:
                tr.transcribe(a, sr)
            asr[f"{backend}/{size}"] = {"cpu_s_per_audio_s": (time.process_time() - c0) / audio_s,
                                        "wall_s_per_audio_s": (time.perf_counter() - w0) / audio_s}
    results["asr"] = {"audio_s": audio_s, **asr}

    # 4. the audio measures on the same speech: what they add to scoring, per audio second
    results["measures"] = measures_cost(audios, [r["words"] for r in rows], audio_s)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
