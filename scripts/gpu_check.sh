#!/usr/bin/env bash
# The check for the days a GPU is at hand: builds glass with the cuda device for that GPU, runs the
# whole test suite (the cross-device tests of tests/kernels then run every op on cuda against cpu,
# besides emu), trains the toy GPT on cuda for a few hundred steps and briefly on cpu, times the
# kernel ladders (profile_op --variant all), runs the NCCL check, and prints
# a short table. Everything it prints also goes to bench/gpu_check_<date>.txt; copy the table,
# with the date and GPU, into bench/RESULTS.md.
#
#   scripts/gpu_check.sh [--arch 90] [--steps 300] [--build build-gpu]
#
# It fails loudly rather than hanging: no GPU, a failed build, a failed test or a failed run ends
# it with a message and a non-zero status; every stage runs under a time limit.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=90 steps=300 build=build-gpu cpu_steps=20
while (($#)); do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done

mkdir -p bench
log="bench/gpu_check_$(date -u +%Y%m%d_%H%M%S).txt"
exec > >(tee "$log") 2>&1
die() { echo "gpu_check: FAILED: $*"; exit 1; }

echo "gpu_check: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
gpu=$(timeout 60 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) ||
  die "nvidia-smi found no GPU"
[[ -n "$gpu" ]] || die "nvidia-smi lists no GPU"
echo "gpu: $gpu"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$nvcc" ]] || die "nvcc not found (PATH, /usr/local/cuda/bin)"
echo "nvcc: $("$nvcc" --version | tail -1)"

# 1. Build: Release, cuda for this GPU's architecture only (one architecture keeps nvcc fast).
echo "== build ($build, sm_$arch)"
timeout 1800 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGLASS_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGLASS_BUILD_TESTS=ON \
  -DGLASS_BUILD_BENCH=OFF >/dev/null || die "cmake configure (missing packages? see scripts/setup.sh)"
timeout 1800 cmake --build "$build" -j "$(nproc)" >/dev/null || die "build"

# 2. The whole suite, each test under a time limit; a hung kernel becomes a timeout, not a hang.
echo "== tests"
set +e
(cd "$build" && timeout 1800 ctest -j "$(nproc)" --timeout 300 --output-on-failure) >"$build/ctest.log" 2>&1
ctest_status=$?
set -e
tests_line=$(grep -E "tests passed|tests failed" "$build/ctest.log" | tail -1)
echo "${tests_line:-no ctest summary (status $ctest_status)}"
grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\)" "$build/ctest.log" || true
cuda_cases=$(grep -c "_cuda " "$build/ctest.log" || true)
echo "cross-device cases on cuda: $cuda_cases"

# 3. train_gpt on cuda (a few hundred steps) and on cpu (a few, for tokens/s).
train() {  # train DEVICE STEPS METRICS [FLAGS...]
  timeout 900 "$build/samples/train_gpt" --data data/tinyshakespeare.txt --device "$1" --steps "$2" \
    --eval-every 0 --eval-batches 4 --sample 0 --quiet --metrics "$3" "${@:4}" >"$3.out" 2>&1 ||
    { cat "$3.out"; die "train_gpt --device $1"; }
}
# Median tokens/s after the first 3 steps (warm-up), and the last step's loss.
summary() {
  /usr/bin/env python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tps = [r["tokens_per_s"] for r in rows[3:]] or [r["tokens_per_s"] for r in rows]
print(f"{statistics.median(tps):.0f} {rows[-1]['loss']:.4f} {len(rows)}")
PY
}
echo "== train_gpt"
rm -f "$build"/metrics_*.jsonl*
train cuda "$steps" "$build/metrics_cuda.jsonl"
train cpu "$cpu_steps" "$build/metrics_cpu.jsonl"
train cuda "$steps" "$build/metrics_cuda_tf32.jsonl" --tf32  # cuBLASLt with CUBLAS_COMPUTE_32F_FAST_TF32
cuda_summary=$(summary "$build/metrics_cuda.jsonl") || die "reading $build/metrics_cuda.jsonl"
cpu_summary=$(summary "$build/metrics_cpu.jsonl") || die "reading $build/metrics_cpu.jsonl"
read -r cuda_tps cuda_loss cuda_n <<<"$cuda_summary"
read -r cpu_tps cpu_loss cpu_n <<<"$cpu_summary"
tf32_summary=$(summary "$build/metrics_cuda_tf32.jsonl") || die "reading $build/metrics_cuda_tf32.jsonl"
read -r tf32_tps tf32_loss tf32_n <<<"$tf32_summary"

# 4. The kernel ladders on the GPU: every rung of each ladder, timed, with its roofline fraction.
echo "== kernel ladders (profile_op --variant all)"
ladders=passed
for op in softmax:4096,1024 layernorm:4096,1024 matmul:2048,2048,2048; do
  timeout 300 "$build/samples/profile_op" --device cuda --operation "${op%%:*}" --variant all \
    --shape "${op#*:}" --output "$build/ladder_${op%%:*}.json" || ladders=FAILED
done

# 5. The NCCL check of the comm/ layer, when it exists.
nccl="not run (scripts/gpu_check_nccl.sh absent)"
if [[ -x scripts/gpu_check_nccl.sh ]]; then
  if BUILD="$build" timeout 900 scripts/gpu_check_nccl.sh; then nccl=passed; else nccl=FAILED; fi
fi

echo
echo "| gpu_check | $(date -u +%Y-%m-%d) | ${gpu%%,*} |"
echo "|---|---|---|"
echo "| ctest | ${tests_line:-?} | cuda cross-device cases: $cuda_cases |"
echo "| train_gpt cuda | $cuda_tps tokens/s | loss $cuda_loss after $cuda_n steps |"
echo "| train_gpt cuda --tf32 | $tf32_tps tokens/s | loss $tf32_loss after $tf32_n steps |"
echo "| train_gpt cpu | $cpu_tps tokens/s ($(nproc) cores) | loss $cpu_loss after $cpu_n steps |"
echo "| kernel ladders | $ladders | tables above; rows in $build/ladder_*.json |"
echo "| nccl | $nccl | |"
echo "log: $log"
[[ $ctest_status -eq 0 ]] || die "ctest (see $build/ctest.log)"
[[ "$nccl" != FAILED ]] || die "scripts/gpu_check_nccl.sh"
[[ "$ladders" != FAILED ]] || die "profile_op --variant all on cuda"
echo "gpu_check: passed"
