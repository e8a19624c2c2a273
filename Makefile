# make demo: set up .venv and launch the app on http://127.0.0.1:7860
# make test: install the system packages the tests need (.ci/apt-packages.txt: as root or with
#            passwordless sudo, else it stops and prints the command), set up .venv (+ test
#            extras) and run the whole test suite (.ci/suite.sh: two workers, then the modules
#            that fork a GPU worker alone)
# make typecheck: mypy over gepard_demo/ and eval/ (mypy.ini): 0 errors; make test runs it first
# make test-fast: the edit-test loop: every test but the browser's, the forking ones and the slow ones
#            (pytest.ini's markers), in two workers: under its 3-minute aim (2 min 50 s wall, 1345 tests,
#            on this 2-vCPU AMD EPYC at load ~1, 2026-12-06; 5 min 10 s before 29 tests were marked slow)
# make test-slowed: the whole suite with a busy loop pinned on each core (.ci/slowed.sh), as the
#            pool's slowest host runs it: the check before a submission that no test assumes speed
# make test-isa: the numerics-sensitive tests again under the pool's other CPU kinds' instruction
#            sets (AVX2 only; AVX-512 with BF16, no AMX): .ci/test-isa.sh
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --disable-pip-version-check -q

.PHONY: demo test test-fast test-slowed test-isa typecheck setup setup-test system-packages bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check -q --upgrade pip

# torch first and alone: 2.13.0 is the CPU wheel here; later installs then find it satisfied.
$(VENV)/.demo-installed: $(PY) requirements.txt requirements-eval.txt
	$(PIP) torch==2.13.0
	$(PIP) -r requirements.txt -c constraints.txt
	$(PY) -c "import transformers, sys; from transformers import Qwen3_5ForCausalLM; print('transformers', transformers.__version__, 'has Qwen3.5')"
	$(PY) -m gepard_demo normalize --build  # NeMo's grammars compiled once, not on a first visitor's request
	# librosa's numba kernels compiled into their cache once, here: its explicitly typed ones compile when
	# librosa.util is imported, and several processes doing that at once on a fresh install (the suite's
	# workers) wrote a cache that later crashed a reader (SIGSEGV in librosa.util.localmin)
	$(PY) -c "import numpy as n, librosa.util.utils; librosa.pyin(n.random.default_rng(0).standard_normal(22050).astype(n.float32), fmin=60, fmax=400, sr=22050)"
	touch $@

$(VENV)/.test-installed: $(VENV)/.demo-installed requirements-test.txt requirements-test-nodeps.txt requirements-nemo.txt
	$(PIP) -r requirements-test.txt -c constraints.txt
	$(PIP) --no-deps -r requirements-test-nodeps.txt
	$(PIP) -r requirements-nemo.txt -c constraints.txt
	touch $@

setup: $(VENV)/.demo-installed
# Headless Chromium and fonts for the browser tests; first, so a missing one stops make at once.
system-packages:
	@.ci/system-packages.sh
setup-test: $(VENV)/.test-installed

demo: setup
	$(PY) app.py

test: system-packages setup-test typecheck
	PY=$(PY) .ci/suite.sh

# mypy over gepard_demo/ and eval/ (mypy.ini): strict on the seams, and no error anywhere
typecheck: setup-test
	$(PY) -m mypy

test-fast: setup-test
	$(PY) -m pytest -n 2 --dist loadfile -q -m "not browser and not forks and not slow"

test-slowed: system-packages setup-test
	PY=$(PY) .ci/slowed.sh .ci/suite.sh

test-isa: setup-test
	PY=$(PY) .ci/test-isa.sh

bench: system-packages setup-test
	for b in benchmarks/*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
