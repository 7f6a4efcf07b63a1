# The two commands of the README:
#   make train   install what is missing, build Release (every program of samples/), train the toy
#                GPT on Tiny Shakespeare
#   make test    install what is missing, build with ASan+UBSan (and nvcc where it is found), run
#                each fuzz target for a few seconds, then the whole suite; this is what CI runs
# Also: make test-release runs the whole suite on a Release build (with the benchmarks built);
# make debug builds debug_step with debug information for docs/debugging.md (build-g).
# Extra flags for train_gpt go in ARGS, e.g. make train ARGS="--steps 100".

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
ARGS ?=

.PHONY: setup setup-test setup-fuzz build debug train test test-release bench fuzz fuzz-smoke clean

setup:
	@scripts/setup.sh

setup-test:
	@scripts/setup.sh --test

setup-fuzz:
	@scripts/setup.sh --fuzz

# Every program of samples/ (the docs use them all, from the tour's first command on).
build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGLASS_BUILD_TESTS=OFF -DGLASS_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target samples
	@echo "built: $(addprefix $(BUILD)/samples/,$(SAMPLES))"

SAMPLES = train_gpt prepare_data generate profile_op roofline debug_step

# What docs/debugging.md's gdb walkthrough steps through: debug_step with debug information
# (RelWithDebInfo; kernels/cuda/softmax.cu at -O0), cpu and emu only (no nvcc: it builds in minutes).
DEBUG_BUILD ?= build-g
debug: setup
	cmake -S . -B $(DEBUG_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASS_BUILD_TESTS=OFF -DGLASS_BUILD_BENCH=OFF -DGLASS_CUDA=OFF >/dev/null
	cmake --build $(DEBUG_BUILD) -j $(JOBS) --target debug_step
	@echo "built: $(DEBUG_BUILD)/samples/debug_step (docs/debugging.md)"

# No --data here: train_gpt's default is data/tinyshakespeare.txt, and ARGS="--data X" replaces it.
train: build
	$(BUILD)/samples/train_gpt $(ARGS)

# One build checks everything CI can: every test under AddressSanitizer and UndefinedBehaviorSanitizer
# (-O1 -g: RelWithDebInfo, which also runs the gdb walkthrough of docs/debugging.md; the tests' and
# samples' own code at -O0, which GCC compiles 3-4x faster under UBSan: CMakeLists.txt), with the cuda
# device's host code on the emulated CUDA runtime (CUDA_RUNTIME=emu, GLASS_CUDA_RUNTIME=emu,
# emucuda/README.md): `--device cuda` runs here on emulated GPUs with asynchronous streams, so the
# cross-device tests, the PyTorch oracle and the cuda runtime tests run on cuda too. Where nvcc is
# found, the GPU's code is still compiled, as a check that fails CI but is not linked: nvcc compiles
# kernels/cuda's device code for sm_90 only (the same sources as sm_80; CUDA_ARCHS="80;90" for
# both; -fatbin: the host half is the emu build's, kernels/cuda/nvcc/ptxas_resources.py), and the host
# code that uses the CUDA runtime is compiled once more against the real runtime, NCCL and NVTX
# headers (engine/cuda/real_runtime_check). Without a GPU none of that runs. One build rather than
# a Release and a sanitizer build keeps CI well within its time.
# CUDA_RUNTIME=real builds the cuda device on the real runtime, as scripts/gpu_check.sh does on a
# GPU (CMake's default); without a GPU its cuda tests then skip.
CUDA_ARCHS ?= 90
CUDA_RUNTIME ?= emu
# The suite CI runs (.ci/run): every test under ASan+UBSan. Every committed fuzz input is replayed
# there (fuzz_replay_<target>, built by GCC); the libFuzzer build itself is `make fuzz-smoke`'s.
test: setup-test
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASS_SANITIZE=ON -DGLASS_BUILD_TESTS=ON -DGLASS_BUILD_BENCH=OFF "-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCHS)" -DGLASS_CUDA_RUNTIME=$(CUDA_RUNTIME) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && GLASS_REQUIRE_ORACLE=1 ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

# The libFuzzer smoke test: make fuzz's targets built by clang at -O0 (FUZZ_BUILD_TYPE=Debug, in a
# directory of its own: a few seconds of fuzzing need no optimiser, and clang compiles the
# sanitized libraries in 2.4 minutes there against 6.1 at -O1), each run for FUZZ_SMOKE_SECONDS.
# Run it after touching a parser, a fuzz harness or anything clang might read differently from GCC.
# It used to run inside `make test`; on CI's two cores it took 3.3-4.6 minutes (plus clang's
# install) that the suite's 35-minute budget no longer has (bench/RESULTS.md, 2026-12-07).
FUZZ_SMOKE_SECONDS ?= 3
FUZZ_SMOKE_BUILD ?= build-fuzz-smoke
fuzz-smoke:
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) FUZZ_BUILD=$(FUZZ_SMOKE_BUILD) FUZZ_BUILD_TYPE=Debug

# The whole suite on the build users run (Release, -O3 -march=native), benchmarks built too.
test-release: setup-test
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGLASS_BUILD_TESTS=ON -DGLASS_BUILD_BENCH=ON "-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCHS)" >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && GLASS_REQUIRE_ORACLE=1 ctest --output-on-failure -j $(JOBS)

# The benchmarks against PyTorch: eager op overhead (bench/op_overhead), then training throughput.
bench: setup-test
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGLASS_BUILD_BENCH=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target op_overhead
	$(BUILD)/bench/op_overhead
	bench/run.sh

# libFuzzer on every file parser and the command line (tests/fuzz, docs/reliability.md): a clang
# build with ASan+UBSan (cpu device only: no emu, no cuda, so that it builds in minutes), then each
# target for FUZZ_SECONDS, starting from its committed corpus. New crashes land in
# $(FUZZ_BUILD)/crashes/; commit them to tests/fuzz/corpus/<target>/ once fixed.
# clang 15 or newer: clang 14 lacks the builtin behind libstdc++'s std::source_location.
# `scripts/setup.sh --fuzz` installs Debian's clang-16 and libclang-rt-16-dev (libFuzzer and the
# sanitizer runtimes) when they are missing; with another FUZZ_CXX, install its runtimes yourself.
FUZZ_BUILD ?= build-fuzz
FUZZ_BUILD_TYPE ?= RelWithDebInfo
FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang-16
FUZZ_CXX ?= clang++-16
fuzz: setup-fuzz
	@command -v $(FUZZ_CXX) >/dev/null || { echo "make fuzz: $(FUZZ_CXX) not found (apt install clang-16 libclang-rt-16-dev, or set FUZZ_CC/FUZZ_CXX)"; exit 1; }
	@test -f "$$($(FUZZ_CXX) -print-file-name=libclang_rt.fuzzer-$$(uname -m).a)" || { echo "make fuzz: $(FUZZ_CXX) has no libFuzzer runtime (apt install libclang-rt-16-dev)"; exit 1; }
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=$(FUZZ_CC) -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) -DCMAKE_BUILD_TYPE=$(FUZZ_BUILD_TYPE) -DGLASS_SANITIZE=ON -DGLASS_FUZZ=ON -DGLASS_BUILD_TESTS=OFF -DGLASS_BUILD_BENCH=OFF -DGLASS_EMU=OFF -DGLASS_CUDA=OFF -DGLASS_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link" >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(FUZZ_SMOKE_BUILD) $(DEBUG_BUILD)
