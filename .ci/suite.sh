#!/usr/bin/env bash
# The whole test suite, as `make test` runs it: every module but those that fork a GPU worker in
# two parallel workers (pytest-xdist; a module stays on one worker, so its fixtures are built
# once), and beside them, in a pytest process of their own, the forking ones (pytest.ini, marker
# `forks`). A fork copies only the thread that forks, so it must not happen inside an xdist worker
# (whose own threads may hold a lock the child then waits on forever); a separate plain pytest has
# no such threads. Its output is printed once the parallel pass ends. Extra arguments go to both.
#   PY=.venv/bin/python .ci/suite.sh [-x] [-k ...]
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
forks_log=$(mktemp)
"$PY" -m pytest -m forks "$@" > "$forks_log" 2>&1 &
forks=$!
trap 'kill "$forks" 2>/dev/null; rm -f "$forks_log"' EXIT
"$PY" -m pytest -n 2 --dist loadfile -m "not forks" "$@"
parallel=$?
wait "$forks"
forked=$?
echo "== the forking modules (pytest -m forks), run beside the parallel pass:"
cat "$forks_log"
echo "== parallel pass exit $parallel, forking modules exit $forked"
# 5 is pytest's "no test selected": a -k that picks from one pass only is no failure; none at all is.
ok() { [ "$1" = 0 ] || [ "$1" = 5 ]; }
ok "$parallel" && ok "$forked" && [ "$parallel$forked" != 55 ]
