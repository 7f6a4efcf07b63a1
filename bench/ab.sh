#!/usr/bin/env bash
# Benchmark: two builds of train_gpt against each other on the default model's step, for a
# before/after of a change to glass itself (bench/run.sh compares glass with PyTorch).
#
# On a shared or virtual machine the host moves the step by up to 1.5x from minute to minute
# (bench/RESULTS.md), so the two binaries run in rounds of four processes, OLD NEW NEW OLD: a
# drift during a round lands on both. Each process writes a metrics file of its own, emptied first
# (train_gpt --metrics appends: a file kept across runs turns a "pair" into a running median over
# every earlier run, which once showed a steady 4-5% between two copies of one binary). Per
# process: the median ms of the steps after --warmup. Printed: every round, then each binary's
# median over its runs, NEW / OLD with the range of the rounds' own ratios, and whether the two
# final losses have the same bits (a change meant to keep the bits must keep them).
#   bench/ab.sh OLD_TRAIN_GPT NEW_TRAIN_GPT [--dtype f32|bf16] [--rounds N] [--steps N]
#               [--warmup N] [--threads N] [-- more train_gpt flags]
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: bench/ab.sh OLD_TRAIN_GPT NEW_TRAIN_GPT [--dtype f32|bf16] [--rounds N] [--steps N] [--warmup N] [--threads N] [-- train_gpt flags]"
(($# >= 2)) || { echo "$usage" >&2; exit 2; }
old=$1 new=$2
shift 2
for bin in "$old" "$new"; do
  [[ -x "$bin" ]] || { echo "bench/ab.sh: $bin is not an executable train_gpt" >&2; exit 2; }
done
dtype=f32 rounds=4 steps=15 warmup=3 threads=2 extra=()
while (($#)); do
  case "$1" in
    --dtype) dtype=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench/ab.sh: unknown argument $1" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
((steps > warmup)) || { echo "bench/ab.sh: --steps must exceed --warmup" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# bench/run.sh's loop: the default model, forward, backward, AdamW; no clipping, no evaluation
flags=(--data data/tinyshakespeare.txt --n-layer 4 --n-head 4 --n-embd 256 --seq-len 128 --batch 16
  --lr 1e-3 --grad-clip 0 --lr-schedule constant --warmup 0 --eval-every 0 --eval-batches 1
  --sample 0 --quiet --dtype "$dtype" --steps "$steps" --threads "$threads" "${extra[@]}")

# run BIN NAME: one process; appends "ms final_loss" to $work/NAME and prints the ms
run() {
  : >"$work/metrics"
  "$1" "${flags[@]}" --metrics "$work/metrics" >/dev/null 2>"$work/stderr" || {
    echo "bench/ab.sh: $1 failed:" >&2
    tail -n 5 "$work/stderr" >&2
    exit 1
  }
  /usr/bin/python3 - "$work/metrics" "$warmup" <<'PY' | tee -a "$work/$2" | cut -d' ' -f1
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(round(statistics.median(r["ms"] for r in rows[int(sys.argv[2]):]), 2), repr(rows[-1]["loss"]))
PY
}

echo "train_gpt default model, $dtype, $threads threads, $steps steps (median of steps after $warmup)"
echo "OLD = $old"
echo "NEW = $new"
ratios=()
for ((round = 1; round <= rounds; ++round)); do
  a1=$(run "$old" old) b1=$(run "$new" new) b2=$(run "$new" new) a2=$(run "$old" old)
  ratio=$(/usr/bin/python3 -c "print(round(($b1 + $b2) / ($a1 + $a2), 3))")
  ratios+=("$ratio")
  echo "round $round: OLD $a1 $a2 | NEW $b1 $b2 ms | NEW / OLD $ratio"
done
/usr/bin/python3 - "$work/old" "$work/new" "${ratios[@]}" <<'PY'
import statistics, sys
old = [l.split() for l in open(sys.argv[1])]
new = [l.split() for l in open(sys.argv[2])]
ratios = [float(r) for r in sys.argv[3:]]
mo = statistics.median(float(r[0]) for r in old)
mn = statistics.median(float(r[0]) for r in new)
print(f"median OLD {mo:.1f} ms, NEW {mn:.1f} ms: NEW / OLD {mn / mo:.3f} "
      f"(rounds {min(ratios):.3f}-{max(ratios):.3f})")
losses = {r[1] for r in old} | {r[1] for r in new}
if len(losses) == 1:
    print(f"same final loss bits in every run: {losses.pop()}")
else:
    print("final losses differ: OLD " + ", ".join(sorted({r[1] for r in old})) +
          "; NEW " + ", ".join(sorted({r[1] for r in new})))
PY
