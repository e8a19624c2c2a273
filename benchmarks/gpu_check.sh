#!/usr/bin/env bash
# The prepared GPU command (issue 55), from the repository's root on the device tool's machine:
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=600)
# 1. gpu_smoke.py: eager and graphed side by side; its JSON, written section by section (a run cut
#    short keeps what it measured), is $OUT/gpu_smoke.json. About 5 minutes.
# 2. load_knee.py on the GPU: our server (full shape, random weights, CUDA graphs, --max-batch 64)
#    under `python -m eval load` at rising concurrency: the knee for docs/PERFORMANCE.md §13, in
#    $OUT/load-knee. Whatever time is left of the call.
# .whl: the wheels this repository pins that the GPU image lacks, for CPython 3.12 (docs/PERFORMANCE.md
# §7 lists them and the one pip command that fetches them).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1
timeout 330 python3 benchmarks/gpu_smoke.py --device cuda --json "$OUT/gpu_smoke.json" 2>&1 | tee "$OUT/gpu_smoke.log"
timeout 220 python3 benchmarks/load_knee.py --device cuda --max-batch 64 --sizes full --admissions realtime \
  --schedules ramp --concurrency 8 16 32 48 64 --prompts 64 --frames 300 --out "$OUT/load-knee" 2>&1 \
  | tee "$OUT/load_knee.log"
