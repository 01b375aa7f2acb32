# halfscope: the commands people use. Everything goes through CMake presets (CMakePresets.json).
#   make demo    install what is missing, build, run the demo on built-in data -> demo/index.html
#   make test    install what is missing, build, run every test (GPU tests skip without a GPU)
#   make deps | build | bench | asan | fuzz | format | clean

SHELL := /bin/bash
export PATH := /usr/local/cuda/bin:$(PATH)
# CI=true selects the CI preset (warnings are errors, CUDA compiled for sm_90 only).
PRESET ?= $(if $(filter true 1,$(CI)),ci,release)
JOBS ?= $(shell nproc)
BIN = build/$(PRESET)/apps/halfscope/halfscope
FUZZ_SECONDS ?= 20
CTEST_ARGS ?=

.PHONY: all deps configure build test demo bench asan fuzz format clean

all: build

deps:
	@tools/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	cmake --build --preset $(PRESET) -j $(JOBS)

test: build
	cd build/$(PRESET) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

demo: build
	$(BIN) demo -o demo

bench: build
	@command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || \
	  { echo "make bench: no GPU here; the benchmarks run on a GPU machine (tools/gpu-check.sh)"; exit 2; }
	$(BIN) bench ceilings --json bench/results/$$(date -u +%F)-$$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' A-Z' '-a-z')-ceilings.json

asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE gpu

fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS) --target $$(cd fuzz && ls fuzz_*.cpp | sed 's/\.cpp$$//')
	tools/run-fuzzers.sh build/fuzz/fuzz $(FUZZ_SECONDS)

format:
	clang-format -i $$(git ls-files '*.hpp' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf build
