#!/usr/bin/env bash
# The NCCL part of the GPU check (scripts/gpu_check.sh calls it after building; it also runs alone):
#   1. NVIDIA's NCCL on one GPU, a world of one: train_gpt --device cuda --comm nccl (NCCL
#      bootstrap, every gradient bucket all-reduced, the parameter broadcast) must train exactly
#      like --comm local.
#   2. the multi-rank path through the emulated NCCL: its own 2-rank suite (emucuda/tests/nccl),
#      the 2-rank collective and data-parallel tests (tests/comm_mpi), and train_gpt --device emu
#      in 2 ranks against one process.
# Prints one line per check and a summary; exits non-zero when a check fails. A part whose build
# is missing (no cuda device, or no NCCL backend for it yet) is reported as SKIP.
#
#   scripts/gpu_check_nccl.sh [BUILD_DIR]     (default: $BUILD from the environment, else build)
# scripts/gpu_check.sh passes its build both ways; an argument wins over the environment.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${BUILD:-build}}
echo "gpu_check_nccl: checking the build in $BUILD"
TRAIN="$BUILD/samples/train_gpt"
MPIRUN="mpirun --allow-run-as-root --oversubscribe"
TINY="--data data/tinyshakespeare.txt --n-layer 2 --n-head 2 --n-embd 64 --seq-len 32 --batch 8 \
--steps 20 --sample 0 --eval-every 0 --quiet"
failed=0
report() { printf '%-58s %s\n' "$1" "$2"; [[ "$2" == FAIL* ]] && failed=1; return 0; }
final_loss() { grep -o 'final loss [0-9.]*' <<<"$1"; }

# 1. NCCL on the GPU, a world of one, against --comm local with the same flags: eagerly, then under
#    --cuda-graph (the all-reduces captured into the step's graph, issued from the capturing thread
#    on a forked stream and joined before the capture ends).
nccl_world_of_one() {  # NAME [FLAGS...]
  local name=$1 out_local out_nccl
  shift
  if ! out_local=$("$TRAIN" $TINY --device cuda --comm local "$@" 2>&1); then
    report "$name" "SKIP (no cuda device: $(tail -1 <<<"$out_local"))"
  elif out_nccl=$("$TRAIN" $TINY --device cuda --comm nccl "$@" 2>&1); then
    if [[ "$(final_loss "$out_nccl")" == "$(final_loss "$out_local")" ]]; then
      report "$name" "PASS ($(final_loss "$out_nccl"))"
    else
      report "$name" "FAIL ($(final_loss "$out_nccl") vs $(final_loss "$out_local"))"
    fi
  elif grep -q "no nccl backend for device cuda" <<<"$out_nccl"; then
    report "$name" "SKIP (this build has no NCCL backend for cuda)"
  else
    report "$name" "FAIL: $(tail -1 <<<"$out_nccl")"
  fi
}
nccl_world_of_one "cuda, NCCL world of one == local"
nccl_world_of_one "cuda, NCCL in a CUDA graph == local in a graph" --cuda-graph

# 2. The emulated NCCL across 2 ranks (needs mpirun and test_comm_mpi: a prebuilt bundle has neither).
if ! command -v mpirun >/dev/null || [[ ! -x "$BUILD/tests/test_comm_mpi" ]]; then
  report "emu, 2 ranks (tests/comm_mpi, train_gpt)" "SKIP (no mpirun or no test_comm_mpi here)"
else
  if out=$(OMP_NUM_THREADS=1 $MPIRUN -np 2 "$BUILD/tests/test_comm_mpi" 2>&1); then
    report "emu + cpu, 2 ranks: tests/comm_mpi" "PASS ($(grep -o '[0-9]* tests from [0-9]* test suites ran' <<<"$out" | head -1))"
  else
    report "emu + cpu, 2 ranks: tests/comm_mpi" "FAIL: $(grep -m1 FAILED <<<"$out")"
  fi
  nccl_suite="$BUILD/emucuda/tests/test_emucuda_nccl"
  if [[ ! -x "$nccl_suite" ]]; then
    report "emulated NCCL, 2 ranks: emucuda/tests/nccl" "SKIP (no test_emucuda_nccl here)"
  elif out=$(OMP_NUM_THREADS=1 $MPIRUN -np 2 "$nccl_suite" 2>&1); then
    report "emulated NCCL, 2 ranks: emucuda/tests/nccl" "PASS ($(grep -o '[0-9]* tests from [0-9]* test suites ran' <<<"$out" | head -1))"
  else
    report "emulated NCCL, 2 ranks: emucuda/tests/nccl" "FAIL: $(grep -m1 FAILED <<<"$out")"
  fi
  one=$(OMP_NUM_THREADS=1 "$TRAIN" $TINY --device emu --threads 1 2>&1)
  two=$(OMP_NUM_THREADS=1 $MPIRUN -np 2 "$TRAIN" $TINY --device emu --threads 1 2>&1)
  if [[ -n "$(final_loss "$two")" && "$(final_loss "$two")" == "$(final_loss "$one")" ]]; then
    report "emu, train_gpt 2 ranks (emulated NCCL) == 1 process" "PASS ($(final_loss "$two"))"
  else
    report "emu, train_gpt 2 ranks (emulated NCCL) == 1 process" "FAIL ($(final_loss "$two") vs $(final_loss "$one"))"
  fi
fi

if ((failed)); then echo "gpu_check_nccl: FAILED"; exit 1; fi
echo "gpu_check_nccl: ok"
