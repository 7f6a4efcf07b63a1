#!/usr/bin/env bash
# The check for the days a GPU is at hand, planned for a lent machine's few minutes: a bare GPU
# machine (nvcc, CMake, a C++ compiler, PyTorch; none of our Debian packages) gets the GPU kit
# (.kit/, made here by scripts/gpu_kit.sh and carried along), unpacked into a private prefix, and:
#
#   stage          what                                                        limit
#   kit            unpack .kit into BUILD/kit-root (scripts/gpu_kit_env.sh)      120 s
#   configure      Release, cuda for this GPU only, tests on                      90 s
#   build          train_gpt, profile_op, test_kernels (cross-device tests)      360 s
#   attention      flash vs naive vs cudnn at GPT-2 shapes (B=8 H=12 T=1024      120 s
#                  D=64): profile_op's attention table, and train_gpt with each
#                  --attention (f32, and flash in bf16): step-1 loss (forward) and
#                  gradient norm (backward) agree, tokens/s
#   cross-device   test_kernels: every op on cuda against cpu                     120 s
#   train          train_gpt on cuda (--steps) and briefly on cpu                  120 s
#   ladders        profile_op --variant all: softmax, layernorm, matmul            90 s
#   nccl           scripts/gpu_check_nccl.sh (builds test_comm_mpi first)         150 s
#   ctest          everything else built, then the whole suite                   600 s
#
# Stages run in that order (by value) while the budget lasts (--budget, default 480 s: one
# `run` call of ~8 minutes, leaving a lent machine's 15 minutes room for its start and one rerun);
# each runs under min(its limit, the budget left) and is reported as SKIPPED when less than its
# minimum is left. A failed stage is reported and the next one still runs, except that nothing
# runs without a build. Expected on an H200 box (16 cores): kit ~15 s, configure ~30 s, build
# 3-4 min (nvcc for one architecture dominates), attention ~1 min, cross-device ~1 min, train
# ~1 min: the first six stages fit in 8 minutes; ladders, nccl and the whole suite take what is
# left, or a second call (the build is kept: `--budget 480` again resumes at once).
#
# Everything it prints also goes to bench/gpu_check_<date>.txt; copy the table, with the date and
# GPU, into bench/RESULTS.md.
#
#   scripts/gpu_check.sh [--arch 90] [--steps 300] [--build build-gpu] [--kit .kit|none]
#                        [--budget 480]
set -uo pipefail
cd "$(dirname "$0")/.."

arch=90 steps=300 build=build-gpu cpu_steps=20 kit=.kit budget=480
while (($#)); do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --kit) kit=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
deadline=$((SECONDS + budget))

mkdir -p bench "$build"
build=$(cd "$build" && pwd)
log="bench/gpu_check_$(date -u +%Y%m%d_%H%M%S).txt"
exec > >(tee "$log") 2>&1
die() { echo "gpu_check: FAILED: $*"; exit 1; }

echo "gpu_check: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), budget ${budget} s"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
gpu=$(timeout 60 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader) ||
  die "nvidia-smi found no GPU"
[[ -n "$gpu" ]] || die "nvidia-smi lists no GPU"
echo "gpu: $gpu"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x "$nvcc" ]] || die "nvcc not found (PATH, /usr/local/cuda/bin)"
echo "nvcc: $("$nvcc" --version | tail -1); $(c++ --version 2>/dev/null | head -1); $(cmake --version | head -1); $(ldd --version | head -1)"
jobs=$(nproc)

# --- stages: name, minimum and limit in seconds; results for the table at the end
declare -A result
order=()
left() { echo $((deadline - SECONDS)); }
# stage NAME MIN LIMIT FUNCTION: runs FUNCTION under the time left (at most LIMIT); a function
# that prints "result: TEXT" as its last such line sets the stage's table entry.
stage() {
  local name=$1 min=$2 limit=$3 fn=$4 l status out
  order+=("$name")
  l=$(left)
  if ((l < min)); then
    result[$name]="SKIPPED (budget: ${l} s left, needs ${min})"
    echo "== $name: ${result[$name]}"
    return 1
  fi
  ((l < limit)) && limit=$l
  echo "== $name (limit ${limit} s)"
  local start=$SECONDS
  out=$(mktemp)
  timeout --foreground "$limit" bash -c "$(declare -f "$fn" summary); $fn" 2>&1 | tee "$out"
  status=${PIPESTATUS[0]}
  local text
  text=$(sed -n 's/^result: //p' "$out" | tail -1)
  rm -f "$out"
  if ((status == 124)); then
    result[$name]="FAILED (timed out after ${limit} s) ${text}"
  elif ((status != 0)); then
    result[$name]="FAILED ${text}"
  else
    result[$name]="passed ${text}"
  fi
  result[$name]+=" [$((SECONDS - start)) s]"
  return "$status"
}
# Median tokens/s after the first 3 steps (warm-up), and the last step's loss.
summary() {
  python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tps = [r["tokens_per_s"] for r in rows[3:]] or [r["tokens_per_s"] for r in rows]
print(f"{statistics.median(tps):.0f} {rows[-1]['loss']:.4f} {len(rows)}")
PY
}
export build arch nvcc jobs steps cpu_steps kit

# 1. The kit: the Debian packages in a private prefix (skipped with --kit none: the machine has them).
kit_stage() {
  [[ "$kit" == none ]] && { echo "result: not used (--kit none)"; return 0; }
  # shellcheck source=scripts/gpu_kit_env.sh
  source scripts/gpu_kit_env.sh "$kit" "$build/kit-root" || return 1
  env | grep -E '^(CMAKE_PREFIX_PATH|PATH|OPAL_PREFIX|PMIX_INSTALL_PREFIX|LD_LIBRARY_PATH|GLASS_KIT_ROOT)=' >"$build/kit.env"
  echo "result: $(grep -vc '^#' "$kit/MANIFEST.txt") packages unpacked"
}
stage kit 20 120 kit_stage || die "kit: ${result[kit]} (scripts/gpu_kit.sh makes .kit where apt works; carry it along)"
# the kit's environment for every later stage
if [[ -f "$build/kit.env" && "$kit" != none ]]; then
  while IFS= read -r line; do export "${line?}"; done <"$build/kit.env"
fi

# 2. Configure: Release, cuda for this GPU's architecture only (one architecture keeps nvcc fast);
#    cuDNN from the CUDA toolkit or from PyTorch's pip package.
configure_stage() {
  local cudnn_root=""
  if [[ ! -f "$(dirname "$nvcc")/../include/cudnn_version.h" ]]; then
    cudnn_root=$(python3 -c 'import nvidia.cudnn as c; print(list(c.__path__)[0])' 2>/dev/null || true)
  fi
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGLASS_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGLASS_BUILD_TESTS=ON -DGLASS_BUILD_BENCH=OFF \
    ${cudnn_root:+-DCUDNN_ROOT="$cudnn_root"} >"$build/configure.log" 2>&1 ||
    { tail -30 "$build/configure.log"; echo "result: cmake configure (see $build/configure.log)"; return 1; }
  echo "result: $(grep -o 'cuDNN[^(]*(cuDNN attention on)\|cuDNN 9 not found' "$build/configure.log" | head -1)"
}
stage configure 30 90 configure_stage || die "configure: ${result[configure]} (see $build/configure.log)"

# 3. Build what the next stages need first; the rest is built by the ctest stage.
build_stage() {
  cmake --build "$build" -j "$jobs" --target train_gpt profile_op test_kernels >"$build/build.log" 2>&1 ||
    { grep -m10 -A3 "error" "$build/build.log"; echo "result: see $build/build.log"; return 1; }
}
stage build 120 360 build_stage || die "build: ${result[build]} (see $build/build.log)"

# 4. Attention at GPT-2 shapes: the kernels timed (profile_op) and three trainings that differ only
#    in the attention kernel. Step 1's loss is the forward of the same weights; its gradient norm
#    (--grad-clip makes train_gpt report it) is the backward. naive in f32 is the reference; flash in
#    f32 must agree to 1e-4, cudnn (bf16 inside) and flash in bf16 (--dtype bf16, the default on
#    cuda) to 2e-2; cudnn runs twice and must give the same losses bit for bit (its backward graph is
#    the deterministic variant).
attention_stage() {
  timeout 60 "$build/samples/profile_op" --device cuda --operation attention --variant all \
    --shape 8,12,1024,64 --output "$build/ladder_attention.json" || echo "profile_op attention: FAILED"
  local a ok=0
  for a in naive flash cudnn cudnn_again flash_bf16; do
    rm -f "$build/attn_$a.jsonl"
    local kernel=${a%_again} dtype=f32
    [ "$a" = flash_bf16 ] && { kernel=flash; dtype=bf16; }
    timeout 60 "$build/samples/train_gpt" --data data/tinyshakespeare.txt --device cuda --attention "$kernel" --dtype "$dtype" \
      --n-layer 2 --n-head 12 --n-embd 768 --seq-len 1024 --batch 8 --steps 6 --grad-clip 1.0 \
      --eval-every 0 --sample 0 --quiet --metrics "$build/attn_$a.jsonl" >"$build/attn_$a.out" 2>&1 ||
      { echo "train_gpt --attention $a: $(tail -1 "$build/attn_$a.out")"; ok=1; }
  done
  python3 - "$build" <<'PY' || ok=1
import json, os, statistics, sys
b = sys.argv[1]
def rows(a):
    p = f"{b}/attn_{a}.jsonl"
    return [json.loads(l) for l in open(p) if l.strip()] if os.path.exists(p) else []
ref = rows("naive")
bad, parts = False, []
for a, tol in (("naive", 0), ("flash", 1e-4), ("cudnn", 2e-2), ("flash_bf16", 2e-2)):
    r = rows(a)
    if not r:
        parts.append(f"{a}: no run"); bad = True; continue
    tps = statistics.median([x["tokens_per_s"] for x in r[1:]] or [r[0]["tokens_per_s"]])
    line = f"{a}: {tps:.0f} tok/s"
    if ref and a != "naive":
        dl = abs(r[0]["loss"] - ref[0]["loss"]) / abs(ref[0]["loss"])
        dg = abs(r[0]["grad_norm"] - ref[0]["grad_norm"]) / abs(ref[0]["grad_norm"])
        ok = dl <= tol and dg <= tol
        bad |= not ok
        line += f", step-1 loss rel diff {dl:.1e}, grad norm rel diff {dg:.1e} ({'ok' if ok else 'OVER ' + str(tol)})"
    parts.append(line)
again = rows("cudnn_again")
if again and rows("cudnn"):
    same = [x["loss"] for x in again] == [x["loss"] for x in rows("cudnn")]
    bad |= not same
    parts.append("cudnn twice: " + ("same losses, bit for bit" if same else "DIFFERENT losses (not deterministic)"))
print("\n".join(parts))
print("result: " + "; ".join(parts))
sys.exit(1 if bad else 0)
PY
  return $ok
}
stage attention 45 120 attention_stage

# 5. The cross-device tests: every op on cuda (and emu) against cpu.
cross_device_stage() {
  (cd "$build" && timeout 120 tests/test_kernels --gtest_brief=1) >"$build/test_kernels.log" 2>&1
  local status=$?
  grep -E "^\[  (PASSED|FAILED)|tests? ran" "$build/test_kernels.log" | tail -3
  echo "result: $(grep -E '^\[  PASSED|^\[  FAILED' "$build/test_kernels.log" | tr '\n' ' ')"
  return $status
}
stage cross-device 30 120 cross_device_stage

# 6. train_gpt on cuda (a few hundred steps) and on cpu (a few, for tokens/s).
train_stage() {
  local d n
  for d in cuda cpu; do
    n=$steps; [[ $d == cpu ]] && n=$cpu_steps
    rm -f "$build/metrics_$d.jsonl"
    "$build/samples/train_gpt" --data data/tinyshakespeare.txt --device "$d" --steps "$n" \
      --eval-every 0 --eval-batches 4 --sample 0 --quiet --metrics "$build/metrics_$d.jsonl" \
      >"$build/metrics_$d.out" 2>&1 || { tail -3 "$build/metrics_$d.out"; echo "result: train_gpt --device $d"; return 1; }
  done
  read -r cuda_tps cuda_loss cuda_n <<<"$(summary "$build/metrics_cuda.jsonl")"
  read -r cpu_tps cpu_loss cpu_n <<<"$(summary "$build/metrics_cpu.jsonl")"
  echo "result: cuda $cuda_tps tokens/s, loss $cuda_loss after $cuda_n steps; cpu ($(nproc) cores) $cpu_tps tokens/s, loss $cpu_loss after $cpu_n steps"
}
stage train 40 120 train_stage

# 7. The kernel ladders on the GPU: every rung of each ladder, timed, with its roofline fraction.
ladders_stage() {
  local op ok=0
  for op in softmax:4096,1024 layernorm:4096,1024 matmul:2048,2048,2048; do
    timeout 60 "$build/samples/profile_op" --device cuda --operation "${op%%:*}" --variant all \
      --shape "${op#*:}" --output "$build/ladder_${op%%:*}.json" || ok=1
  done
  echo "result: tables above; rows in $build/ladder_*.json"
  return $ok
}
stage ladders 30 90 ladders_stage

# 8. The NCCL check of the comm/ layer (its 2-rank tests need test_comm_mpi).
nccl_stage() {
  cmake --build "$build" -j "$jobs" --target test_comm_mpi >>"$build/build.log" 2>&1 ||
    { echo "result: building test_comm_mpi failed"; return 1; }
  BUILD="$build" scripts/gpu_check_nccl.sh "$build"
}
stage nccl 60 150 nccl_stage

# 9. Everything else, and the whole suite, each test under a time limit.
ctest_stage() {
  cmake --build "$build" -j "$jobs" >>"$build/build.log" 2>&1 || { echo "result: build of the rest failed"; return 1; }
  (cd "$build" && ctest -j "$jobs" --timeout 300 --output-on-failure) >"$build/ctest.log" 2>&1
  local status=$?
  grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\)" "$build/ctest.log" || true
  echo "result: $(grep -E 'tests passed|tests failed' "$build/ctest.log" | tail -1); cuda cases: $(grep -c '_cuda ' "$build/ctest.log")"
  return $status
}
stage ctest 240 600 ctest_stage

echo
echo "| gpu_check | $(date -u +%Y-%m-%d) | ${gpu%%,*} |"
echo "|---|---|---|"
failed=0
for name in "${order[@]}"; do
  echo "| $name | ${result[$name]} | |"
  [[ "${result[$name]}" == FAILED* ]] && failed=1
done
echo "log: $log"
((failed)) && die "see the stages marked FAILED above"
echo "gpu_check: passed (stages marked SKIPPED need another call: the build is kept)"
