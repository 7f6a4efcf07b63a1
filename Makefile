# The two commands of the README:
#   make train   install what is missing, build Release, train the toy GPT on Tiny Shakespeare
#   make test    install what is missing, build Release and ASan+UBSan, run the whole suite in both
# Extra flags for train_gpt go in ARGS, e.g. make train ARGS="--steps 100".

JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
ARGS ?=

.PHONY: setup setup-test build build-asan train test test-release test-asan bench clean

setup:
	@scripts/setup.sh

setup-test:
	@scripts/setup.sh --test

build: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGLASS_BUILD_TESTS=OFF -DGLASS_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target train_gpt

train: build
	$(BUILD)/samples/train_gpt --data data/tinyshakespeare.txt $(ARGS)

test: setup-test
	$(MAKE) test-release
	$(MAKE) test-asan

# Where nvcc is found the cuda device is built too; the test build compiles it for sm_90 only (the
# same sources as sm_80; CUDA_ARCHS=80;90 for both), which keeps CI within its time.
CUDA_ARCHS ?= 90
test-release:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DGLASS_BUILD_TESTS=ON -DGLASS_BUILD_BENCH=ON "-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_ARCHS)" >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Sanitizers: -O1 keeps the run fast enough; ASan checks every allocation, UBSan every UB.
# No nvcc here (GLASS_CUDA=OFF): without a GPU its kernels cannot run, nvcc's objects are not
# instrumented, and it would add minutes; the Release build compiles them.
test-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASS_SANITIZE=ON -DGLASS_CUDA=OFF -DGLASS_BUILD_TESTS=ON -DGLASS_BUILD_BENCH=OFF >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -LE slow

bench: setup-test
	bench/run.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
