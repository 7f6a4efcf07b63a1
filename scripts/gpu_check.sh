#!/usr/bin/env bash
# The check for the days a GPU is at hand, planned for a lent machine's few minutes. Two ways in:
#
#   --prebuilt .gpu.tar.xz   (the usual one) glass built HERE by scripts/gpu_bundle.sh for sm_90
#                     and carried along (run's carry: [".gpu.tar.xz"]): no compiling there, the
#                     minutes go to running. A directory .gpu (the bundle unpacked) works too.
#   --kit .kit        a bare GPU machine builds glass itself against the GPU kit (.kit/, made here
#                     by scripts/gpu_kit.sh, unpacked into a private prefix); --kit none: the
#                     machine has the Debian packages
#
#   stage          what                                                        limit
#   bundle         (--prebuilt) its libraries and paths set up, every program loads   30 s
#   kit            (else) unpack .kit into BUILD/kit-root (scripts/gpu_kit_env.sh)   120 s
#   configure      (else) Release, cuda for this GPU only, tests on                  90 s
#   build          (else) train_gpt, profile_op, test_kernels                       360 s
#   cross-device   test_kernels' cuda cases: every op on cuda against cpu, f32     150 s
#                  and bf16 (gtest shards in parallel)
#   train          the default model: cuda f32 and cpu agree at step 1; cuda bf16   120 s
#                  (the default) trains --steps; tokens/s of each
#   attention      flash vs naive vs cudnn at GPT-2 shapes (B=8 H=12 T=1024        120 s
#                  D=64): profile_op's attention table, and train_gpt with each
#                  --attention (f32, and flash in bf16): step-1 loss (forward) and
#                  gradient norm (backward) agree, tokens/s
#   attention-mma  FlashAttention-2 on the Tensor Cores vs flash-simt vs cudnn:     240 s
#                  test_cuda_kernels' GPU-only agreement at T = 1k/4k/16k, D = 64/128;
#                  forward + backward time of each (profile_op, bf16) at those
#                  shapes; GPT-2 124M bf16 tokens/s with each --attention
#   gpt2           --model gpt2 (124M, bf16, B=8, T=1024) eager and --cuda-graph:   150 s
#                  tokens/s, MFU, host syncs, peak memory
#   cuda-tests     the cuda cases of test_engine, test_train, test_cuda_kernels     120 s
#                  (cuDNN's graphs, streams, host syncs, CUDA graphs)
#   sanitizer      compute-sanitizer memcheck over two steps of a small model        90 s
#   ladders        profile_op --variant all: softmax, layernorm, matmul (f32; the    120 s
#                  Tensor Core rung 4 with its bf16 rounding launches), and matmul
#                  in bf16 at 4096^3: the Tensor Core rung against cuBLAS
#   nccl           NCCL in a world of one trains like --comm local (+ with a build:  150 s
#                  scripts/gpu_check_nccl.sh's 2-rank checks)
#   ctest          (else) everything else built, then the whole suite               600 s
#
# Stages run in that order (by value) while the budget lasts (--budget, default 420 s: one `run`
# call of ~7 minutes, leaving a lent machine's 15 minutes room for its start and one rerun); each
# runs under min(its limit, the budget left) and is reported as SKIPPED when less than its minimum
# is left. A failed stage is reported and the next one still runs, except that nothing runs
# without a build. --only a,b runs just those stages (and what they need).
#
# Everything it prints also goes to bench/gpu_check_<date>.txt (and $OUT/gpu_check.txt where the
# device tool sets OUT, with the stages' JSON and logs); copy the table, with the date and GPU,
# into bench/RESULTS.md.
#
#   scripts/gpu_check.sh [--prebuilt .gpu.tar.xz | --kit .kit|none] [--arch 90] [--steps 300]
#                        [--build build-gpu] [--budget 420] [--only STAGES]
set -uo pipefail
cd "$(dirname "$0")/.."

arch=90 steps=300 build=build-gpu cpu_steps=20 kit=.kit budget=420 prebuilt="" only=""
while (($#)); do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --kit) kit=$2; shift 2 ;;
    --prebuilt) prebuilt=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --only) only=",$2,"; shift 2 ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
deadline=$((SECONDS + budget))

mkdir -p bench
log="bench/gpu_check_$(date -u +%Y%m%d_%H%M%S).txt"
# where the device tool collects what comes back ($OUT), the log goes there as it is written
if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  exec > >(tee "$log" "$OUT/gpu_check.txt") 2>&1
else
  exec > >(tee "$log") 2>&1
fi
die() { echo "gpu_check: FAILED: $*"; exit 1; }

echo "gpu_check: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), budget ${budget} s${prebuilt:+, prebuilt $prebuilt}"
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: no NVIDIA driver on this machine"
gpu=$(timeout 60 nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader) ||
  die "nvidia-smi found no GPU"
[[ -n "$gpu" ]] || die "nvidia-smi lists no GPU"
echo "gpu: $gpu"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
echo "nvcc: $("$nvcc" --version 2>/dev/null | tail -1); $(c++ --version 2>/dev/null | head -1); $(ldd --version | head -1); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
jobs=$(nproc)

# --- stages: name, minimum and limit in seconds; results for the table at the end
declare -A result
order=()
left() { echo $((deadline - SECONDS)); }
# Everything a stage made (JSON, logs), for $OUT: one archive, refreshed after each stage so that a
# call cut short still brings back what ran.
collect() {
  [[ -n "${OUT:-}" && -d "${OUT:-}" && -d "$build" ]] || return 0
  (cd "$build" && find . -maxdepth 1 -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.log' \
    -o -name '*.out' -o -name '*.txt' \) -size -8M -print0 | tar -czf "$OUT/artifacts.tar.gz" --null -T -) 2>/dev/null
}
# stage NAME MIN LIMIT FUNCTION: runs FUNCTION under the time left (at most LIMIT); a function
# that prints "result: TEXT" as its last such line sets the stage's table entry.
stage() {
  local name=$1 min=$2 limit=$3 fn=$4 l status out
  if [[ -n "$only" && "$only" != *",$name,"* ]]; then return 0; fi
  order+=("$name")
  l=$(left)
  if ((l < min)); then
    result[$name]="SKIPPED (budget: ${l} s left, needs ${min})"
    echo "== $name: ${result[$name]}"
    return 1
  fi
  ((l < limit)) && limit=$l
  echo "== $name (limit ${limit} s, $(date -u +%H:%M:%S))"
  local start=$SECONDS
  out=$(mktemp)
  timeout --foreground "$limit" bash -c "$(declare -f); $fn" 2>&1 | tee "$out"
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
  collect
  return "$status"
}
# A metrics file's steps after the first 3 (warm-up; all when fewer): median tokens/s, MFU (%),
# host syncs per step, the last loss, the step count and the peak allocation (MiB).
summary() {
  python3 - "$1" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
warm = rows[3:] or rows
med = lambda k: statistics.median([r.get(k, 0) or 0 for r in warm])
print(f"{med('tokens_per_s'):.0f} {100 * med('mfu'):.1f} {med('host_syncs'):.0f} {rows[-1]['loss']:.4f} "
      f"{len(rows)} {max(r.get('peak_allocated_bytes', 0) for r in rows) / 2**20:.0f}")
PY
}
# Relative difference of step S's KEY between two metrics files.
rel_diff() {
  python3 - "$@" <<'PY'
import json, sys
a, b, key, step = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
row = lambda p: [json.loads(l) for l in open(p) if l.strip()][step - 1]
x, y = row(a)[key], row(b)[key]
print(f"{abs(x - y) / max(abs(y), 1e-30):.1e}")
PY
}
# Runs the tests of SUITE matching FILTER in SHARDS gtest shards at once; LOG gets them all.
run_shards() {
  local suite=$1 filter=$2 shards=$3 log=$4 i status=0
  : >"$log"
  for ((i = 0; i < shards; i++)); do
    (cd "$build" && GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i OMP_NUM_THREADS=2 \
      "tests/$suite" --gtest_filter="$filter" --gtest_brief=1 >"$log.$i" 2>&1) &
  done
  for ((i = 0; i < shards; i++)); do wait -n || status=1; done
  for ((i = 0; i < shards; i++)); do cat "$log.$i" >>"$log"; rm -f "$log.$i"; done
  local passed failed
  passed=$(grep -o '^\[  PASSED  \] [0-9]*' "$log" | awk '{s += $NF} END {print s + 0}')
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z]' "$log" || true)
  grep '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | head -40
  echo "$suite: $passed passed, $failed failed" | tee -a "$log"
  ((passed > 0)) || { echo "$suite: no test matched $filter (is the GPU seen?)"; status=1; }
  return $status
}
export build arch nvcc jobs steps cpu_steps kit prebuilt
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
tiny="--data data/tinyshakespeare.txt --n-layer 2 --n-head 2 --n-embd 64 --seq-len 32 --batch 8 --sample 0 --eval-every 0 --quiet"
export tiny

if [[ "$prebuilt" == *.tar.xz ]]; then  # the packed bundle: unpacked beside itself
  [[ -f "$prebuilt" ]] || die "--prebuilt $prebuilt: no such file (scripts/gpu_bundle.sh makes it)"
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$prebuilt" \
    "$(dirname "$prebuilt")" || die "--prebuilt $prebuilt: cannot unpack it"
  prebuilt=${prebuilt%.tar.xz}
fi
if [[ -n "$prebuilt" ]]; then
  # 1'. The bundle: the paths compiled into the tests lead here, and every program loads.
  bundle_stage() {
    local manifest="$prebuilt/MANIFEST.txt" src bin here f so lib_dirs d missing known
    [[ -f "$manifest" ]] || { echo "result: no $manifest (scripts/gpu_bundle.sh makes it; carry it along)"; return 1; }
    here=$(pwd -P)
    src=$(sed -n 's/^source_dir //p' "$manifest")
    bin=$(sed -n 's/^binary_dir //p' "$manifest")
    if [[ "$(cd "$src" 2>/dev/null && pwd -P)" != "$here" ]]; then
      [[ -e "$src" ]] && { echo "result: $src exists and is not this checkout"; return 1; }
      mkdir -p "$(dirname "$src")" && ln -s "$here" "$src"
    fi
    if [[ "$(cd "$bin" 2>/dev/null && pwd -P)" != "$here/$prebuilt/build-gpu" ]]; then
      [[ -e "$bin" ]] && { echo "result: $bin exists and is not the bundle's"; return 1; }
      ln -s "$here/$prebuilt/build-gpu" "$bin"
    fi
    # the bundle's libraries where this machine's loader lacks them; CUDA's from the toolkit and
    # from PyTorch's nvidia-* wheels
    rm -rf "$prebuilt/lib-used" && mkdir -p "$prebuilt/lib-used"
    known=$(ldconfig -p | awk 'NR > 1 {print $1}')
    for f in "$prebuilt"/lib/*; do
      so=$(basename "$f")
      grep -qxF "$so" <<<"$known" || ln -s "$here/$f" "$prebuilt/lib-used/$so"
    done
    lib_dirs="$here/$prebuilt/lib-used:/usr/local/cuda/lib64"
    for d in $(python3 -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null); do
      for f in $(find "$d" -maxdepth 3 -type d -name lib | sort); do lib_dirs+=":$f"; done
    done
    echo "LD_LIBRARY_PATH=$lib_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" >"$prebuilt/bundle.env"
    export LD_LIBRARY_PATH="$lib_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    missing=$(for f in $(find "$bin/" -type f -perm -u+x); do ldd "$f" | grep 'not found'; done | sort -u)
    [[ -z "$missing" ]] || { echo "$missing"; echo "result: libraries not found: $(tr -s ' \t\n' ' ' <<<"$missing")"; return 1; }
    ldd "$bin/samples/train_gpt" | grep -E 'cudart|cublas|cudnn|nccl|openblas|gomp' | sed 's/^/  /'
    echo "result: $(ls "$prebuilt/lib-used" | wc -l) of $(ls "$prebuilt/lib" | wc -l) bundle libraries used; $(sed -n 's/^commit //p' "$manifest" | cut -c1-12)"
  }
  build=$(sed -n 's/^binary_dir //p' "$prebuilt/MANIFEST.txt" 2>/dev/null)
  [[ -n "$build" ]] || die "--prebuilt $prebuilt: no MANIFEST.txt with a binary_dir (scripts/gpu_bundle.sh)"
  export build
  stage bundle 10 60 bundle_stage || die "bundle: ${result[bundle]}"
  while IFS= read -r line; do export "${line?}"; done <"$prebuilt/bundle.env"
  gpt2_data="$prebuilt/data/gpt2"
else
  mkdir -p "$build"
  build=$(cd "$build" && pwd)
  export build
  gpt2_data="$build/data_gpt2"
  # 1. The kit: the Debian packages in a private prefix (skipped with --kit none: the machine has them).
  kit_stage() {
    [[ "$kit" == none ]] && { echo "result: not used (--kit none)"; return 0; }
    # shellcheck source=scripts/gpu_kit_env.sh
    source scripts/gpu_kit_env.sh "$kit" "$build/kit-root" || return 1
    env | grep -E '^(CMAKE_PREFIX_PATH|PATH|OPAL_PREFIX|PMIX_INSTALL_PREFIX|LD_LIBRARY_PATH|GLASS_KIT_ROOT)=' >"$build/kit.env"
    echo "result: $(grep -vc '^#' "$kit/MANIFEST.txt") packages unpacked"
  }
  stage kit 20 120 kit_stage || die "kit: ${result[kit]} (scripts/gpu_kit.sh makes .kit where apt works; carry it along)"
  if [[ -f "$build/kit.env" && "$kit" != none ]]; then
    while IFS= read -r line; do export "${line?}"; done <"$build/kit.env"
  fi
  # 2. Configure: Release, cuda for this GPU's architecture only (one architecture keeps nvcc
  #    fast); cuDNN from the CUDA toolkit or from PyTorch's pip package.
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
    cmake --build "$build" -j "$jobs" --target train_gpt profile_op prepare_data test_kernels \
      test_engine test_train test_cuda_kernels >"$build/build.log" 2>&1 ||
      { grep -m10 -A3 "error" "$build/build.log"; echo "result: see $build/build.log"; return 1; }
    [[ -f "$gpt2_data/train_000000.bin" ]] || "$build/samples/prepare_data" \
      --input data/tinyshakespeare.txt --out "$gpt2_data" --val-fraction 0.1 >/dev/null
  }
  stage build 120 360 build_stage || die "build: ${result[build]} (see $build/build.log)"
fi
export gpt2_data

# 4. The cross-device table: every op on cuda against cpu, f32 and bf16 (the emu rows run in CI).
cross_device_stage() {
  run_shards test_kernels '*cuda*' 8 "$build/test_kernels_cuda.log"
  local status=$?
  echo "result: $(tail -1 "$build/test_kernels_cuda.log")"
  return $status
}
stage cross-device 30 150 cross_device_stage

# 5. The default model: cuda in f32 against cpu at step 1 and step N (the same seed and data, so
#    the same weights and batches); then cuda's default, bf16, for --steps with a final evaluation.
train_stage() {
  local run args="--data data/tinyshakespeare.txt --eval-every 0 --eval-batches 4 --sample 0 --quiet"
  for run in cuda_f32 cpu cuda_bf16; do
    local device=${run%%_*} n=$cpu_steps extra=""
    [[ $run == cuda_f32 ]] && extra="--dtype f32"
    [[ $run == cuda_bf16 ]] && { n=$steps; extra="--dtype bf16"; }
    rm -f "$build/train_$run.jsonl"
    "$build/samples/train_gpt" $args --device "$device" --steps "$n" $extra \
      --metrics "$build/train_$run.jsonl" >"$build/train_$run.out" 2>&1 ||
      { tail -3 "$build/train_$run.out"; echo "result: train_gpt --device $device $extra failed"; return 1; }
  done
  local d1 dn ok=0 parts=()
  d1=$(rel_diff "$build/train_cuda_f32.jsonl" "$build/train_cpu.jsonl" loss 1)
  dn=$(rel_diff "$build/train_cuda_f32.jsonl" "$build/train_cpu.jsonl" loss "$cpu_steps")
  python3 -c "import sys; sys.exit(0 if float('$d1') <= 1e-4 and float('$dn') <= 1e-3 else 1)" || ok=1
  for run in cuda_f32 cpu cuda_bf16; do
    read -r tps mfu syncs loss n mem <<<"$(summary "$build/train_$run.jsonl")"
    parts+=("$run $tps tok/s, MFU $mfu%, $syncs host syncs/step, loss $loss after $n steps, peak $mem MiB")
  done
  grep -h 'val loss' "$build/train_cuda_bf16.out" | tail -1
  echo "result: cuda f32 vs cpu loss rel diff: step 1 $d1, step $cpu_steps $dn$( ((ok)) && echo ' (OVER 1e-4/1e-3)'); $(IFS=';'; echo "${parts[*]}")"
  return $ok
}
stage train 40 120 train_stage

# 6. Attention at GPT-2 shapes: the kernels timed (profile_op) and trainings that differ only in the
#    attention kernel. Step 1's loss is the forward of the same weights; its gradient norm
#    (--grad-clip makes train_gpt report it) is the backward. naive in f32 is the reference; flash
#    in f32 must agree to 1e-4, cudnn (bf16 inside) and flash in bf16 to 2e-2; cudnn runs twice and
#    must give the same losses bit for bit (its backward graph is the deterministic variant).
attention_stage() {
  timeout 60 "$build/samples/profile_op" --device cuda --operation attention --variant all \
    --shape 8,12,1024,64 --output "$build/ladder_attention.json" || echo "profile_op attention: FAILED"
  local a ok=0
  # cuDNN's SDPA engines compile their kernels with NVRTC at run time: without a libnvrtc the
  # loader finds, heuristics return no engine. Say what the loader has, and let cuDNN log why
  # (warnings and errors) into cudnn_log.txt, which the artifacts keep.
  local dirs="${LD_LIBRARY_PATH:-}"
  echo "cuDNN: $(ldd "$build/samples/train_gpt" | grep -oE 'libcudnn[a-z_]*\.so\.[0-9]+ => [^ ]+' | head -2 | tr '\n' ' ')"
  echo "NVRTC: $({ ldconfig -p; for d in ${dirs//:/ }; do ls "$d" 2>/dev/null; done; } | grep -oE 'libnvrtc\.so\.[0-9]+' | sort -u | tr '\n' ' ')"
  for a in naive flash cudnn cudnn_again flash_bf16; do
    rm -f "$build/attn_$a.jsonl"
    local kernel=${a%_again} dtype=f32
    [ "$a" = flash_bf16 ] && { kernel=flash; dtype=bf16; }
    CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$build/cudnn_log.txt" \
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
    line = f"{a}: {tps:.0f} tok/s, peak {max(x['peak_allocated_bytes'] for x in r) / 2**20:.0f} MiB"
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

# 7. FlashAttention-2 on the Tensor Cores (flash-mma, the default for bf16) against the CUDA-core
#    kernel (flash-simt) and cuDNN: (a) agreement, from test_cuda_kernels' GPU-only case (out and
#    dqkv of flash-mma and cudnn within bf16 tolerance of flash-simt's at T = 1k, 4k, 16k and
#    D = 64, 128); (b) forward + backward time of each kernel at those shapes (profile_op's
#    attention operation, bf16; B x T = 8k tokens, H x D = 768); (c) GPT-2 124M bf16 tokens/s
#    with each --attention.
attention_mma_stage() {
  local ok=0 t d a b h ms line parts=()
  (cd "$build" && OMP_NUM_THREADS=2 tests/test_cuda_kernels --gtest_filter='FlashAttentionMma.*' \
    --gtest_brief=1) >"$build/attention_mma_tests.log" 2>&1 || ok=1
  parts+=("tests: $(grep -E '^\[  (PASSED|FAILED)  \]' "$build/attention_mma_tests.log" | tr '\n' ' ')")
  for t in 1024 4096 16384; do
    for d in 64 128; do
      b=$((8192 / t)); ((b < 1)) && b=1
      h=$((768 / d))
      line="B=$b H=$h T=$t D=$d fwd+bwd:"
      for a in flash-simt flash-mma cudnn; do
        if timeout 60 "$build/samples/profile_op" --device cuda --dtype bf16 --operation attention \
          --attention "$a" --shape "$b,$h,$t,$d" --warmup 2 --repeats 5 \
          --output "$build/attn_mma_${a}_${t}_${d}.json" >"$build/attn_mma_${a}_${t}_${d}.out" 2>&1; then
          ms=$(python3 -c 'import json, sys; print(f"{json.load(open(sys.argv[1]))[\"median_ms\"]:.2f}")' \
            "$build/attn_mma_${a}_${t}_${d}.json")
          line+=" $a $ms ms"
        else
          line+=" $a FAILED ($(tail -1 "$build/attn_mma_${a}_${t}_${d}.out"))"
          ok=1
        fi
      done
      echo "$line"
      parts+=("$line")
    done
  done
  for a in flash-simt flash-mma cudnn; do
    rm -f "$build/gpt2_attn_$a.jsonl"
    if timeout 60 "$build/samples/train_gpt" --model gpt2 --data "$gpt2_data" --device cuda --batch 8 \
      --steps 12 --eval-every 0 --eval-batches 1 --sample 0 --quiet --attention "$a" \
      --metrics "$build/gpt2_attn_$a.jsonl" >"$build/gpt2_attn_$a.out" 2>&1; then
      read -r tps mfu syncs loss n mem <<<"$(summary "$build/gpt2_attn_$a.jsonl")"
      line="GPT-2 124M bf16 --attention $a: $tps tok/s, MFU $mfu%, loss $loss after $n steps"
    else
      line="GPT-2 124M bf16 --attention $a: FAILED ($(tail -1 "$build/gpt2_attn_$a.out"))"
      ok=1
    fi
    echo "$line"
    parts+=("$line")
  done
  echo "result: $(IFS=';'; echo "${parts[*]}")"
  return $ok
}
stage attention-mma 60 240 attention_mma_stage

# 8. GPT-2 124M in bf16 (the default on cuda), eager and replayed as a CUDA graph.
gpt2_stage() {
  local mode ok=0 parts=()
  for mode in eager graph; do
    rm -f "$build/gpt2_$mode.jsonl"
    timeout 70 "$build/samples/train_gpt" --model gpt2 --data "$gpt2_data" --device cuda --batch 8 \
      --steps 20 --eval-every 0 --eval-batches 1 --sample 0 --quiet \
      $([[ $mode == graph ]] && echo --cuda-graph) --metrics "$build/gpt2_$mode.jsonl" \
      >"$build/gpt2_$mode.out" 2>&1 || { echo "gpt2 $mode: $(tail -2 "$build/gpt2_$mode.out")"; ok=1; continue; }
    read -r tps mfu syncs loss n mem <<<"$(summary "$build/gpt2_$mode.jsonl")"
    parts+=("$mode $tps tok/s, MFU $mfu%, $syncs host syncs/step, loss $loss after $n steps, peak $mem MiB")
  done
  grep -h -m1 'MFU' "$build/gpt2_eager.out" 2>/dev/null
  echo "result: GPT-2 124M bf16 B=8 T=1024: $(IFS=';'; echo "${parts[*]}")"
  return $ok
}
stage gpt2 60 150 gpt2_stage

# 9. The cuda cases of the other suites: devices, streams, host syncs, CUDA graphs, cuDNN's graphs.
cuda_tests_stage() {
  local status=0 suite
  for suite in test_engine test_train test_cuda_kernels test_samples; do
    local filter='*cuda*:*Cuda*:*CUDA*:*Cudnn*:*cudnn*:*Graph*:*HostSync*'
    run_shards "$suite" "$filter" 4 "$build/${suite}_cuda.log" || status=1
  done
  echo "result: $(for s in test_engine test_train test_cuda_kernels test_samples; do tail -1 "$build/${s}_cuda.log"; done | tr '\n' ';')"
  return $status
}
stage cuda-tests 30 120 cuda_tests_stage

# 10. compute-sanitizer's memcheck over two steps of a small model, f32 and bf16 (bad addresses,
#    misaligned accesses, out-of-bounds shared memory, CUDA API errors).
sanitizer_stage() {
  local sanitizer dtype ok=0 parts=()
  sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x "$sanitizer" ]] || { echo "result: no compute-sanitizer"; return 1; }
  for dtype in f32 bf16; do
    "$sanitizer" --tool memcheck --error-exitcode 3 --print-limit 20 \
      "$build/samples/train_gpt" $tiny --device cuda --dtype $dtype --steps 2 \
      >"$build/memcheck_$dtype.out" 2>&1 || ok=1
    parts+=("$dtype: $(grep -o 'ERROR SUMMARY: [0-9]* errors*' "$build/memcheck_$dtype.out" || tail -1 "$build/memcheck_$dtype.out")")
    grep -m6 -E '^=========  *(Invalid|Program hit|Address|at .* in |Saved host)' "$build/memcheck_$dtype.out"
  done
  echo "result: memcheck $(IFS=';'; echo "${parts[*]}")"
  return $ok
}
stage sanitizer 30 90 sanitizer_stage

# 11. The kernel ladders on the GPU: every rung of each ladder, timed, with its roofline fraction.
ladders_stage() {
  local op ok=0
  for op in softmax:4096,1024 layernorm:4096,1024 rmsnorm:8192,4096 matmul:2048,2048,2048; do
    timeout 60 "$build/samples/profile_op" --device cuda --operation "${op%%:*}" --variant all \
      --shape "${op#*:}" --output "$build/ladder_${op%%:*}.json" || ok=1
  done
  # The Tensor Core GEMM rung (mma.sync, bf16 in, f32 accumulate) against cuBLAS's bf16 GEMM
  # (cublasGemmStridedBatchedEx) on the same bf16 operands; each row's roofline fraction is
  # against the bf16 Tensor Core peak (989 TFLOP/s dense on an H200).
  timeout 60 "$build/samples/profile_op" --device cuda --operation matmul --variant all \
    --dtype bf16 --shape 4096,4096,4096 --output "$build/ladder_matmul_bf16.json" || ok=1
  # The RMSNorm pair in bf16, Llama's training dtype (8192 rows of 4096: 128 MiB through memory).
  timeout 60 "$build/samples/profile_op" --device cuda --operation rmsnorm --variant all \
    --dtype bf16 --shape 8192,4096 --output "$build/ladder_rmsnorm_bf16.json" || ok=1
  echo "result: tables above; rows in $build/ladder_*.json"
  return $ok
}
stage ladders 30 120 ladders_stage

# 12. NCCL: a world of one on the GPU (and, with a build here, the 2-rank checks of the emulator).
nccl_stage() {
  if [[ -z "$prebuilt" ]]; then
    cmake --build "$build" -j "$jobs" --target test_comm_mpi test_emucuda_nccl >>"$build/build.log" 2>&1 ||
      { echo "result: building test_comm_mpi and test_emucuda_nccl failed"; return 1; }
  fi
  BUILD="$build" scripts/gpu_check_nccl.sh "$build"
}
stage nccl 30 150 nccl_stage

# 13. Everything else, and the whole suite, each test under a time limit (a build here only).
ctest_stage() {
  cmake --build "$build" -j "$jobs" >>"$build/build.log" 2>&1 || { echo "result: build of the rest failed"; return 1; }
  (cd "$build" && ctest -j "$jobs" --timeout 300 --output-on-failure) >"$build/ctest.log" 2>&1
  local status=$?
  grep -E "^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\)" "$build/ctest.log" || true
  echo "result: $(grep -E 'tests passed|tests failed' "$build/ctest.log" | tail -1); cuda cases: $(grep -c '_cuda ' "$build/ctest.log")"
  return $status
}
[[ -z "$prebuilt" ]] && stage ctest 240 600 ctest_stage

echo
echo "| gpu_check | $(date -u +%Y-%m-%d) | ${gpu%%,*} |"
echo "|---|---|---|"
failed=0
for name in "${order[@]}"; do
  echo "| $name | ${result[$name]} | |"
  [[ "${result[$name]}" == FAILED* ]] && failed=1
done
echo "log: $log"
collect
((failed)) && die "see the stages marked FAILED above"
echo "gpu_check: passed (stages marked SKIPPED need another call)"
