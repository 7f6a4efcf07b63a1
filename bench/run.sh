#!/usr/bin/env bash
# Benchmark: train_gpt's default model on `cpu` against the same model in PyTorch 1.13, same thread
# count, same OpenBLAS settings, one after the other. Prints tokens/s for both and the ratio
# glass / PyTorch. --arch llama trains the llama-tiny preset's shape instead (L=4, H=8, Hkv=4,
# C=256, F=704, T=128, tied LM head; B=16) against tests/oracle/torch_llama.py's Llama (with the
# benchmark's fast attention path, bench/torch_train_gpt.py), same settings otherwise.
#
# PyTorch runs at its best setting: OMP_WAIT_POLICY=PASSIVE (bench/torch_train_gpt.py) and the
# widest OpenBLAS GEMM kernel this CPU runs (SkylakeX with AVX-512, Haswell with AVX2), exported
# for both systems, whatever the shell sets (--coretype env keeps the shell's OPENBLAS_CORETYPE,
# --coretype NAME exports NAME). OpenBLAS 0.3.21 otherwise takes the shell's kernel, or picks one by
# CPU model and falls back to SSE3 "Prescott" on a model it does not know (the Xeon VM of
# RESULTS.md): PyTorch's GEMMs would then run at a fraction of the hardware's rate and flatter
# glass, whose f32 GEMMs are its own. This environment sets Haswell (AVX2), which on the AVX-512
# machines of RESULTS.md makes PyTorch's step 1.2-1.5x slower than SkylakeX.
#
# On a shared or virtual machine the host's load moves both systems from run to run, and not by
# the same factor (RESULTS.md: PyTorch's step by ±10%, glass's by ±4%). --rounds N runs the pair N
# times, glass then PyTorch each round, prints every round and the median ratio.
#
# --dtype bf16 runs both in bf16 mixed precision: train_gpt --dtype bf16 (bf16 weight copies and
# activations, f32 masters and AdamW) and PyTorch under torch.autocast("cpu", dtype=torch.bfloat16)
# (f32 weights and AdamW, bf16 matmuls and the ops autocast lists), in the same run; each round
# also runs glass in f32, and the table gives glass bf16 / glass f32 beside glass / PyTorch.
#   bench/run.sh [--arch gpt2|llama] [--dtype f32|bf16] [--threads N] [--steps N] [--warmup N] [--coretype best|env|NAME] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."

arch=gpt2 dtype=f32 threads=2 steps=30 warmup=3 coretype=best rounds=1
while (($#)); do
  case "$1" in
    --arch) arch=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --coretype) coretype=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "bench/run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$arch" in
  gpt2)
    model="train_gpt default model (L=4 H=4 C=256 T=128 B=16)"
    shape="--n-layer 4 --n-head 4 --n-embd 256" ;;
  llama)
    model="llama-tiny (L=4 H=8 Hkv=4 C=256 F=704 T=128 B=16, tied)"
    shape="--arch llama --n-layer 4 --n-head 8 --n-kv-head 4 --n-embd 256 --ffn-hidden 704" ;;
  *) echo "bench/run.sh: --arch $arch: gpt2 or llama" >&2; exit 2 ;;
esac
case "$dtype" in
  f32|bf16) ;;
  *) echo "bench/run.sh: --dtype $dtype: f32 or bf16" >&2; exit 2 ;;
esac

shell_coretype=${OPENBLAS_CORETYPE:-(unset)}
case "$coretype" in
  env) ;;
  best)
    flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
    best=""
    if [[ " $flags " == *" avx512f "* && " $flags " == *" avx512bw "* && " $flags " == *" avx512vl "* ]]; then
      best=SkylakeX
    elif [[ " $flags " == *" avx2 "* && " $flags " == *" fma "* ]]; then
      best=Haswell
    fi
    if [[ -n "$best" ]]; then
      export OPENBLAS_CORETYPE=$best
      chosen=" (chosen by bench/run.sh: the widest OpenBLAS kernel this CPU runs; the shell had $shell_coretype)"
    fi
    ;;
  *)
    export OPENBLAS_CORETYPE=$coretype
    chosen=" (--coretype $coretype; the shell had $shell_coretype)"
    ;;
esac

cmake -S . -B "${BUILD:-build}" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "${BUILD:-build}" -j "$(nproc)" --target train_gpt >/dev/null

data=data/tinyshakespeare.txt
# The loop PyTorch runs: forward, backward, AdamW; no clipping, constant lr, no evaluation.
# (train_gpt's llama ties its LM head by default, as torch_train_gpt.py's.)
common="$shape --seq-len 128 --batch 16 --lr 1e-3"
metrics=$(mktemp)
trap 'rm -f "$metrics"' EXIT
# One round: glass, then PyTorch; each prints one JSON line. train_gpt appends to --metrics, so
# each round starts from an empty file.
run_glass() {  # run_glass DTYPE
  : >"$metrics"
  "${BUILD:-build}"/samples/train_gpt --data $data $common --dtype "$1" --steps $((steps + warmup)) \
    --threads "$threads" --grad-clip 0 --lr-schedule constant --warmup 0 --eval-every 0 \
    --eval-batches 1 --sample 0 --quiet --metrics "$metrics" >/dev/null
  /usr/bin/python3 - "$metrics" "$warmup" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
ms = sum(r["ms"] for r in rows)
print(json.dumps({"tokens_per_s": 16 * 128 * len(rows) / (ms / 1000), "ms_per_step": ms / len(rows),
                  "final_loss": rows[-1]["loss"]}))
PY
}
run_torch() {
  /usr/bin/python3 bench/torch_train_gpt.py --data $data $common --dtype "$dtype" --steps "$steps" \
    --warmup-steps "$warmup" --threads "$threads" 2>/dev/null | tail -n 1
}
results=()
# Each round: glass at --dtype, PyTorch, and under bf16 glass f32 (else the f32 run again: unused).
for ((round = 0; round < rounds; ++round)); do
  g=$(run_glass "$dtype")
  t=$(run_torch)
  if [[ $dtype == bf16 ]]; then f=$(run_glass f32); else f=$g; fi
  results+=("$g" "$t" "$f")
done

/usr/bin/python3 - "$model" "$threads" "$steps" "${chosen:-}" "$dtype" "${results[@]}" <<'PY'
import json, os, statistics, sys
model, threads, steps, chosen, dtype = sys.argv[1:6]
runs = sys.argv[6:]
pairs = [(json.loads(g), json.loads(t), json.loads(f))
         for g, t, f in zip(runs[0::3], runs[1::3], runs[2::3])]
print(f"{model}, {threads} threads, {steps} timed steps, --dtype {dtype}"
      + (" (PyTorch: torch.autocast cpu bfloat16)" if dtype == "bf16" else ""))
# PyTorch's GEMMs are OpenBLAS's, whose kernel follows OPENBLAS_CORETYPE (unset: the CPU model's,
# SSE3 "Prescott" on a model it does not know); glass's f32 GEMMs are its own (kernels/cpu/sgemm.cpp).
print("OPENBLAS_CORETYPE=" + os.environ.get("OPENBLAS_CORETYPE", "(unset)") +
      " OPENBLAS_L2_SIZE=" + os.environ.get("OPENBLAS_L2_SIZE", "(unset)") + chosen)
ratios, over_f32 = [], []
for i, (g, t, f) in enumerate(pairs):
    if len(pairs) > 1:
        print(f"round {i + 1} of {len(pairs)}")
    print(f"{'system':<16}{'tokens/s':>12}{'ms/step':>12}")
    print(f"{'glass (cpu)':<16}{g['tokens_per_s']:>12.0f}{g['ms_per_step']:>12.1f}")
    print(f"{'pytorch ' + t['torch_version']:<16}{t['tokens_per_s']:>12.0f}{t['ms_per_step']:>12.1f}")
    ratios.append(g["tokens_per_s"] / t["tokens_per_s"])
    print(f"ratio glass / pytorch: {ratios[-1]:.2f}x")
    if dtype == "bf16":
        print(f"{'glass f32':<16}{f['tokens_per_s']:>12.0f}{f['ms_per_step']:>12.1f}")
        over_f32.append(g["tokens_per_s"] / f["tokens_per_s"])
        print(f"ratio glass bf16 / glass f32: {over_f32[-1]:.2f}x")
for name, r in (("glass / pytorch", ratios), ("glass bf16 / glass f32", over_f32)):
    if len(r) > 1:
        print(f"median {name} over {len(r)} rounds: {statistics.median(r):.2f}x "
              f"(min {min(r):.2f}x, max {max(r):.2f}x)")
PY
