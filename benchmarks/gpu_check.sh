#!/usr/bin/env bash
# The prepared GPU command (issues 55, 66), from the repository's root on the device tool's machine:
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=600)
# Each section writes its files to $OUT as it finishes (and $OUT/sections.txt its exit code), so a
# run cut short keeps what it measured. About 9 minutes in all:
# 1. stream_timeline.py (<= 100 s): a 64-frame stream of the full shape under the torch profiler,
#    talker and codec graphed: per frame the talker's replay, the codec, the session's host work,
#    the device's gaps between kernels, copies and syncs, the top kernels by time:
#    $OUT/timeline/timeline.md and timeline.json.
# 2. gpu_smoke.py (<= 300 s): eager and graphed side by side (the codec's chunks graphed with the
#    talker's step); its JSON, written section by section, is $OUT/gpu_smoke.json.
# 3. load_knee.py on the GPU (<= 160 s): our server (full shape, random weights, CUDA graphs,
#    --max-batch 64) under `python -m eval load` at rising concurrency: the knee for
#    docs/PERFORMANCE.md §13, in $OUT/load-knee.
# .whl: the wheels this repository pins that the GPU image lacks, for CPython 3.12 (docs/PERFORMANCE.md
# §7 lists them and the one pip command that fetches them).
#
# --dry-run: every section on the CPU with the tiny shapes (each script's --quick), no wheels and no
# nvidia-smi, with this checkout's .venv; $OUT defaults to a new temporary folder. It proves the
# command runs end to end without a GPU (tests/benchmarks/test_benchmarks.py runs it).
set -uo pipefail
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ "$DRY" = 1 ]; then
  PY=${PYTHON:-.venv/bin/python}
  DEV=(--device cpu)
  QUICK=(--quick)
  SCALE=(--quick)
  LIMITS=(600 900 900)  # a shared CPU: a catch for a hang, not the GPU's budget
else
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site || exit 1
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
  PY=python3
  DEV=(--device cuda)
  QUICK=()
  SCALE=(--max-batch 64 --sizes full --admissions realtime --schedules ramp --concurrency 8 16 32 48 64
         --prompts 64 --frames 300)
  LIMITS=(100 300 160)
fi

section() {  # name, seconds, command...: its output to $OUT/name.log, its exit code to sections.txt
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  echo "$name ${PIPESTATUS[0]}" >> "$OUT/sections.txt"
}

section timeline "${LIMITS[0]}" "$PY" benchmarks/stream_timeline.py "${DEV[@]}" "${QUICK[@]}" --out "$OUT/timeline"
section gpu_smoke "${LIMITS[1]}" "$PY" benchmarks/gpu_smoke.py "${DEV[@]}" "${QUICK[@]}" --json "$OUT/gpu_smoke.json"
section load_knee "${LIMITS[2]}" "$PY" benchmarks/load_knee.py "${DEV[@]}" "${SCALE[@]}" --out "$OUT/load-knee"
echo "== done: $OUT"
