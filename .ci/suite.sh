#!/usr/bin/env bash
# The whole test suite, as `make test` runs it: every module but those that fork a GPU worker in
# two parallel workers (pytest-xdist; a module stays on one worker, so its fixtures are built
# once), then the forking ones alone (pytest.ini, marker `forks`). Extra arguments go to both.
#   PY=.venv/bin/python .ci/suite.sh [-x] [-k ...]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
"$PY" -m pytest -n 2 --dist loadfile -m "not forks" "$@"
"$PY" -m pytest -m forks "$@"
