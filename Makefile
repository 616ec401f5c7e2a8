# Entry point. `make demo`: set up, build, run the main job.
# `make test`: set up, build, run every C++ (ctest) and Python (pytest) test.
# `make bench`: build and run the benchmarks.
BUILD ?= build
JOBS ?= $(shell nproc)
PYTHON := /usr/bin/python3
CMAKE_FLAGS ?=

.PHONY: all setup configure build demo test check test-cpp test-python bench clean experiments build-torch2 test-torch2

all: build

setup:
	bash scripts/setup.sh

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The main job: three small models trained when absent (--resume also finishes
# an interrupted run and does nothing for a finished one), then the report of
# every family and of those models: out/report.html, out/report.json, out/figures/.
# Experiment suites summarized under out/experiments (make experiments, or
# posenc experiment report DIR) join the report as its Experiments section;
# for a suite with none there, its published default run (docs/results/
# SUITE-default, when it holds a summary.json) joins instead.
DEMO_RUNS := rope learned alibi
DEMO_EXPERIMENTS = $(patsubst %/summary.json,%,$(wildcard out/experiments/*/summary.json))
DEMO_PUBLISHED = $(foreach s,$(wildcard docs/results/*-default/summary.json),\
  $(if $(wildcard out/experiments/$(patsubst docs/results/%-default/summary.json,%,$(s))/summary.json),,\
    $(patsubst %/summary.json,%,$(s))))
demo: build
	for e in $(DEMO_RUNS); do \
	  $(BUILD)/bin/posenc train --task order --encoding $$e --steps 150 --batch 16 --warmup 30 \
	    --out out/runs/$$e --resume || exit 1; \
	done
	$(BUILD)/bin/posenc report --out out $(addprefix --model out/runs/,$(DEMO_RUNS)) \
	  $(addprefix --experiments ,$(DEMO_EXPERIMENTS) $(DEMO_PUBLISHED))

# Under CI (CI=true) the test command also runs the sanitizer build of the
# torch-free tests and each fuzzer (about 10 more minutes on 2 cores); a
# finding fails it. `make check` does the same anywhere.
test: build
	$(MAKE) --no-print-directory test-cpp test-python
	if [ "$(CI)" = "true" ]; then $(MAKE) --no-print-directory asan fuzz; fi

check: build
	$(MAKE) --no-print-directory test-cpp test-python asan fuzz

test-cpp:
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-python:
	cd python && POSENC_LIBRARY=$(abspath $(BUILD))/lib/libposenc_nn.so \
	  POSENC_CLI=$(abspath $(BUILD))/bin/posenc $(PYTHON) -m pytest -q -n $(JOBS) --dist loadfile ../tests/python

# PyTorch 2 beside Debian 12's torch 1.13: posenc built against Debian 13's torch 2.6 in a root made from
# Debian's packages alone (scripts/torch2-root, under $(BUILD)), its ctest and the whole Python suite run
# there; scripts/torch2-run CMD runs any command in that root with that build importable.
TORCH2_ROOT = $(BUILD)/torch2-root
TORCH2_BUILD = $(BUILD)/torch2
TORCH2_RUN = POSENC_TORCH2_ROOT=$(abspath $(TORCH2_ROOT)) POSENC_TORCH2_BUILD=$(abspath $(TORCH2_BUILD)) scripts/torch2-run

build-torch2: setup
	bash scripts/torch2-root $(TORCH2_ROOT)
	$(TORCH2_RUN) cmake -S . -B $(TORCH2_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DPOSENC_BUILD_BENCH=ON \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(CMAKE_FLAGS)
	$(TORCH2_RUN) cmake --build $(TORCH2_BUILD) -j $(JOBS)

test-torch2: build-torch2
	$(TORCH2_RUN) ctest --test-dir $(TORCH2_BUILD) --output-on-failure -j $(JOBS)
	$(TORCH2_RUN) $(MAKE) --no-print-directory test-python BUILD=$(TORCH2_BUILD)

# The experiment suites on real text (docs/experiments.md): hours on 2 cores,
# resumable: run it again after an interruption and it continues.
experiments: build
	$(BUILD)/bin/posenc experiment run properties --out out/experiments/properties --jobs 2 --threads 1
	$(BUILD)/bin/posenc experiment run extrapolation --out out/experiments/extrapolation --jobs 2 --threads 1

# Every benchmark runs; the exit status is the first failure's (1 wrong, 3 below target).
# The attention benchmarks also time torch 2's SDPA in the torch 2 root (made here when absent: minutes, once).
bench: build
	bash scripts/torch2-root $(TORCH2_ROOT) || echo "posenc: no torch 2 root: the benchmarks compare with torch 1.13 alone"
	export POSENC_TORCH2_ROOT=$(abspath $(TORCH2_ROOT)); status=0; for b in bench_sinusoidal bench_rope bench_relative bench_attention bench_attention_backward bench_training bench_linear_cross_entropy; do $(BUILD)/bin/$$b || { s=$$?; [ $$status -ne 0 ] || status=$$s; }; done; exit $$status

clean:
	rm -rf $(BUILD) build-asan build-fuzz out

.PHONY: fuzz asan

# libFuzzer on the strict .safetensors and .npy readers: a clang build with
# ASan+UBSan in build-fuzz, each fuzzer run FUZZ_SECONDS (default 60) on a
# copy of tests/fuzz/corpus; crash inputs land in build-fuzz/artifacts.
fuzz:
	CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOSENC_BUILD_NN=OFF \
	  -DPOSENC_BUILD_TESTS=ON -DPOSENC_BUILD_BENCH=OFF -DPOSENC_FUZZ=ON \
	  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
	cmake --build build-fuzz -j $(JOBS) --target fuzz_safetensors fuzz_npy
	for t in safetensors npy; do \
	  rm -rf build-fuzz/corpus/$$t && mkdir -p build-fuzz/corpus/$$t build-fuzz/artifacts && \
	  cp tests/fuzz/corpus/$$t/* build-fuzz/corpus/$$t/ && \
	  build-fuzz/bin/fuzz_$$t -max_total_time=$(or $(FUZZ_SECONDS),60) -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/artifacts/$$t- build-fuzz/corpus/$$t || exit 1; \
	done

# Every torch-free C++ test (kernels, io, analysis, plot, fuzz replays, CLI,
# consumer) under AddressSanitizer + UndefinedBehaviorSanitizer (gcc, build-asan).
# fontconfig (under Cairo) keeps process-wide caches that LeakSanitizer reports: suppressed.
asan:
	CXX=g++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPOSENC_BUILD_NN=OFF \
	  -DPOSENC_BUILD_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS="-O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
	cmake --build build-asan -j $(JOBS)
	printf 'leak:libfontconfig.so\n' > build-asan/lsan.supp
	LSAN_OPTIONS=suppressions=$(abspath build-asan/lsan.supp) \
	  CXXFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS)
