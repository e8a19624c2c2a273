#!/usr/bin/env bash
# Run a command as the pool's slowest host would: a busy loop pinned on each core beside it, so
# every process of the command gets about half a core (docs/DESIGN.md, "Tests that hold at any
# speed"). make test-slowed runs the suite this way; the loops end with the command.
#   .ci/slowed.sh .venv/bin/python -m pytest tests/page/test_app_browser.py
set -euo pipefail
loops=()
for cpu in $(seq 0 $(($(nproc) - 1))); do
  taskset -c "$cpu" sh -c 'while :; do :; done' &
  loops+=($!)
done
trap 'kill "${loops[@]}" 2>/dev/null || true' EXIT
"$@"
