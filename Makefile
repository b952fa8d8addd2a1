# Two commands for a fresh machine: `make demo` and `make test` (README).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
# One build at a time in this tree (several shells may call make).
LOCK := flock /tmp/torchneuron-build-$(shell id -u).lock
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup build test test-runtime test-python test-protected demo bench clean bench-compile

setup: $(VENV)/.deps-stamp

$(VENV)/.deps-stamp: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	touch $@

build: setup
	$(LOCK) sh -c '$(VENV)/bin/cmake -S . -B $(BUILD) -G Ninja -DCMAKE_MAKE_PROGRAM=$(CURDIR)/$(VENV)/bin/ninja -DPython3_EXECUTABLE=$(CURDIR)/$(PY) \
	  -DCMAKE_BUILD_TYPE=Release >/dev/null && $(VENV)/bin/cmake --build $(BUILD) -j2'
	@test -f $(VENV)/.editable-stamp || ($(PY) -m pip install -q --no-build-isolation --no-deps -e . && touch $(VENV)/.editable-stamp)

test-runtime: build
	$(VENV)/bin/ctest --test-dir $(BUILD) --output-on-failure

test-python: build
	$(PY) -m pytest -q

# The suite once more with device memory unreadable outside kernels and copies.
test-protected: build
	TORCHNEURON_PROTECT_MEMORY=1 $(PY) -m pytest -q

test: test-runtime test-python test-protected

# The main job: the three-phase check of all-MiniLM-L6-v2 (real weights), report.html.
demo: build
	$(VENV)/bin/torchneuron check minilm --html report.html --iterations 30 --max-warmup 30
	$(PY) examples/compile_demo.py

bench: build
	$(PY) bench/bench_minilm.py

# The compile path's speed: compiled neuron vs eager neuron vs Inductor, cold/warm compile.
bench-compile: build
	$(PY) bench/bench_compile.py

clean:
	rm -rf $(BUILD) torchneuron/_C*.so
