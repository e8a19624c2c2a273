#!/usr/bin/env bash
# make test-isa: the numerics-sensitive tests (pytest -m numerics) under the instruction sets of
# this pool's other CPU kinds (facts §14): PyTorch's kernels capped by ATEN_CPU_CAPABILITY,
# oneDNN's by ONEDNN_MAX_CPU_ISA, each set before the process first uses them.
#   avx2:AVX2               the AVX2-only machines
#   avx512:AVX512_CORE_BF16 AVX-512 with BF16 and VNNI, no AMX (the AMD EPYC kind)
# A cap can only lower what the CPU has: one above it is skipped, and said (PyTorch would run
# AVX-512 code on a CPU without it). Caps do not reproduce another vendor's cache sizes or thread
# timing, so the tests must not assume those anyway. ISA_CAPS overrides the list.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
caps=${ISA_CAPS:-"avx2:AVX2 avx512:AVX512_CORE_BF16"}
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
ran=0
for cap in $caps; do
  aten=${cap%%:*} onednn=${cap##*:}
  need=()
  case $aten in avx2) need+=(avx2 fma) ;; avx512) need+=(avx512f avx512bw avx512vl avx512dq) ;; esac
  case $onednn in *BF16*) need+=(avx512_bf16) ;; *VNNI*) need+=(avx512_vnni) ;; *AMX*) need+=(amx_tile) ;; esac
  missing=()
  for f in "${need[@]}"; do has "$f" || missing+=("$f"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== skipped $cap: this CPU lacks ${missing[*]}"
    continue
  fi
  export ATEN_CPU_CAPABILITY=$aten ONEDNN_MAX_CPU_ISA=$onednn
  # What the two libraries really run, read back from them.
  isa=$(ONEDNN_VERBOSE=1 "$PY" -c "import torch; print('torch kernels', torch.backends.cpu.get_cpu_capability()); \
torch.nn.functional.conv1d(torch.randn(1, 64, 640), torch.randn(64, 64, 7))" 2>&1 | sed -n 's/.*cpu,isa:\(.*\)/oneDNN \1/p; /^torch kernels/p' | tr '\n' ' ')
  echo "== ATEN_CPU_CAPABILITY=$aten ONEDNN_MAX_CPU_ISA=$onednn: $isa"
  "$PY" -m pytest -m numerics -q -p no:cacheprovider "$@"
  ran=$((ran + 1))
done
[ "$ran" -gt 0 ] || { echo "no cap of ISA_CAPS fits this CPU" >&2; exit 1; }
