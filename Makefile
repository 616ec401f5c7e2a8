# Entry point. `make demo`: set up, build, run the main job.
# `make test`: set up, build, run every C++ (ctest) and Python (pytest) test.
# `make bench`: build and run the benchmarks.
BUILD ?= build
JOBS ?= $(shell nproc)
PYTHON := /usr/bin/python3
CMAKE_FLAGS ?=

.PHONY: all setup configure build demo test test-cpp test-python bench clean

all: build

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/posenc demo --out out

test: build
	$(MAKE) --no-print-directory test-cpp test-python

test-cpp:
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-python:
	cd python && POSENC_LIBRARY=$(abspath $(BUILD))/lib/libposenc_nn.so \
	  POSENC_CLI=$(abspath $(BUILD))/bin/posenc $(PYTHON) -m pytest -q ../tests/python

# Every benchmark runs; the exit status is the first failure's (1 wrong, 3 below target).
bench: build
	status=0; for b in bench_sinusoidal bench_rope bench_relative bench_attention bench_training; do $(BUILD)/bin/$$b || { s=$$?; [ $$status -ne 0 ] || status=$$s; }; done; exit $$status

clean:
	rm -rf $(BUILD) out
