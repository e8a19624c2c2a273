#!/usr/bin/env bash
# The one prepared GPU command: gpu_smoke.py on the device tool's machine, eager and graphed side by
# side, its JSON (written section by section, so a cut run keeps what it measured) under $OUT.
#   run(command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=420)
# .whl holds transformers 5.14.1, tokenizers 0.22.2 and regex 2026.11.19 for CPython 3.12, the
# versions this repository pins that the GPU image lacks (docs/PERFORMANCE.md §7 says how to fetch them).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
PYTHONUNBUFFERED=1 timeout 360 python3 benchmarks/gpu_smoke.py --device cuda --json "$OUT/gpu_smoke.json" 2>&1 \
  | tee "$OUT/gpu_smoke.log"
