#!/usr/bin/env bash
# Proves HERE that the GPU kit (scripts/gpu_kit.sh) is complete, before a GPU machine's minutes are
# spent on it: unpacks .kit into a private prefix (scripts/gpu_kit_env.sh, every library kept),
# configures a clean build (Release, tests on, cuda for sm_90) with this machine's copies hidden
# from CMake's search (CMAKE_IGNORE_PREFIX_PATH=/usr;/), and then checks that
#   - every package CMake found (and OpenBLAS, cblas.h, mpicxx) lies inside the prefix;
#   - no compile included a header of a kit package from /usr/include (the compiler's default
#     include path cannot be hidden, so the dependency files are searched instead);
#   - no link line names a kit library under /usr/lib;
# builds train_gpt and test_comm_mpi, and runs, with the prefix's libraries (LD_LIBRARY_PATH) and
# its relocated OpenMPI (mpirun -np 2): test_comm_mpi in 2 ranks, train_gpt on cpu and on emu.
#
#   scripts/gpu_kit_test.sh [--build build-kit] [--jobs 2]
# Takes ~30 minutes on 2 shared cores (nvcc for sm_90 and the Release build of two programs).
set -uo pipefail
cd "$(dirname "$0")/.."
build=build-kit jobs=2
while (($#)); do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) echo "gpu_kit_test: unknown argument $1" >&2; exit 2 ;;
  esac
done
failed=0
report() { printf '%-62s %s\n' "$1" "$2"; [[ "$2" == FAIL* ]] && failed=1; return 0; }

rm -rf "$build"
export GLASS_KIT_KEEP_RUNTIME=1
# shellcheck source=scripts/gpu_kit_env.sh
source scripts/gpu_kit_env.sh .kit "$build/kit-root" || exit 1
root=$GLASS_KIT_ROOT

# 1. configure with /usr hidden from find_package/find_library/find_path/find_program
start=$SECONDS
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGLASS_BUILD_TESTS=ON -DGLASS_BUILD_BENCH=OFF \
  -DGLASS_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 "-DCMAKE_IGNORE_PREFIX_PATH=/usr;/" \
  >"$build/configure.log" 2>&1 || { tail -30 "$build/configure.log"; report "configure against the kit only" FAIL; exit 1; }
report "configure against the kit only ($((SECONDS - start)) s)" PASS
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
for var in spdlog_DIR fmt_DIR nlohmann_json_DIR CLI11_DIR Boost_DIR boost_context_DIR GTest_DIR \
  OPENBLAS_LIB CBLAS_INCLUDE_DIR MPI_CXX_COMPILER MPI_mpi_LIBRARY; do
  path=$(cache "$var")
  if [[ "$path" == "$root"/* ]]; then
    report "  $var" "PASS (${path#"$root"/})"
  else
    report "  $var" "FAIL (${path:-not found})"
  fi
done

# 2. build two programs: train_gpt (and with it every library and nvcc's kernels) and test_comm_mpi
start=$SECONDS
if cmake --build "$build" -j "$jobs" --target train_gpt test_comm_mpi >"$build/build.log" 2>&1; then
  report "build train_gpt test_comm_mpi (-j$jobs, $(((SECONDS - start) / 60)) min)" PASS
else
  grep -m5 -B2 -A5 "error" "$build/build.log"
  report "build train_gpt test_comm_mpi" FAIL
  exit 1
fi

# 3. nothing of a kit package came from this machine
kit_headers='/usr/include/(spdlog|fmt|nlohmann|CLI|boost|gtest|gmock|[a-z0-9_]+-linux-gnu/(openblas|mpi|openmpi)|mpi\.h|cblas)'
leaks=$(find "$build" -name '*.d' -type f -exec cat {} + 2>/dev/null | tr ' \\' '\n\n' | grep -E "^$kit_headers" | sort -u | head -5)
if [[ -z "$leaks" ]]; then report "  headers of kit packages only from the prefix" PASS
else report "  headers of kit packages only from the prefix" "FAIL ($(tr '\n' ' ' <<<"$leaks"))"; fi
links=$(find "$build" -name link.txt -exec cat {} + | tr ' ' '\n' |
  grep -E '^(-L)?/usr/lib/[^ ]*(spdlog|fmt|openblas|mpi|gtest|gmock|boost)' | sort -u | head -5)
if [[ -z "$links" ]]; then report "  link lines name no kit library under /usr" PASS
else report "  link lines name no kit library under /usr" "FAIL ($(tr '\n' ' ' <<<"$links"))"; fi
from_usr=$(ldd "$build/samples/train_gpt" | grep -E 'spdlog|fmt|openblas|libmpi' | grep -v "$root" || true)
if [[ -z "$from_usr" ]]; then report "  train_gpt loads the kit's spdlog, fmt, OpenBLAS, MPI" PASS
else report "  train_gpt loads the kit's spdlog, fmt, OpenBLAS, MPI" "FAIL ($(tr -s '\t\n' '  ' <<<"$from_usr"))"; fi

# 4. run with the prefix's libraries and its relocated OpenMPI
mpirun=$(command -v mpirun)
[[ "$mpirun" == "$root"/* ]] || report "  mpirun from the prefix" "FAIL ($mpirun)"
if out=$(OMP_NUM_THREADS=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$build/tests/test_comm_mpi" 2>&1); then
  report "mpirun -np 2 test_comm_mpi (relocated OpenMPI)" "PASS ($(grep -o '[0-9]* tests from [0-9]* test suites ran' <<<"$out" | head -1))"
else
  report "mpirun -np 2 test_comm_mpi (relocated OpenMPI)" "FAIL: $(grep -m3 -E 'FAILED|rror' <<<"$out" | tr '\n' ' ')"
fi
tiny="--data data/tinyshakespeare.txt --n-layer 2 --n-head 2 --n-embd 64 --seq-len 32 --batch 8 --steps 5 --sample 0 --eval-every 0 --quiet"
for device in cpu emu; do
  if out=$(OMP_NUM_THREADS=2 timeout 300 "$build/samples/train_gpt" $tiny --device $device 2>&1); then
    report "train_gpt --device $device" "PASS ($(grep -o 'final loss [0-9.]*' <<<"$out"))"
  else
    report "train_gpt --device $device" "FAIL: $(tail -1 <<<"$out")"
  fi
done
if out=$(OMP_NUM_THREADS=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 \
  "$build/samples/train_gpt" $tiny --device emu --threads 1 2>&1); then
  report "mpirun -np 2 train_gpt --device emu" "PASS ($(grep -o 'final loss [0-9.]*' <<<"$out" | head -1))"
else
  report "mpirun -np 2 train_gpt --device emu" "FAIL: $(tail -1 <<<"$out")"
fi
((failed)) && { echo "gpu_kit_test: FAILED"; exit 1; }
echo "gpu_kit_test: the kit builds and runs glass on its own"
