#!/usr/bin/env bash
# Data-parallel scaling on cpu: train_gpt's step time with 1 rank and with 2 ranks (mpirun) on the
# same global batch, and the scaling efficiency t1 / (N tN). Each run gets the same cores in all:
# 1 rank uses them all, 2 ranks half each, so the efficiency is what splitting the batch over
# processes costs (communication, smaller GEMMs), not extra hardware.
#
#   bench/comm_scaling.sh                   # BUILD=build, the default model, 30 steps
#   BUILD=/tmp/b STEPS=10 ARGS="--n-layer 2 --n-embd 64" bench/comm_scaling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STEPS=${STEPS:-30}
ARGS=${ARGS:-}
CORES=${CORES:-$(nproc)}
TRAIN="$BUILD/samples/train_gpt"
[[ -x "$TRAIN" ]] || { echo "comm_scaling: error: $TRAIN not found (build first, or set BUILD)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for ranks in 1 2; do
  threads=$(( CORES / ranks > 0 ? CORES / ranks : 1 ))
  OMP_NUM_THREADS=$threads mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
    "$TRAIN" --device cpu --steps "$STEPS" --threads "$threads" --sample 0 --eval-every 0 --quiet \
    --metrics "$out/ranks$ranks.jsonl" $ARGS > "$out/ranks$ranks.log" 2>&1 \
    || { echo "comm_scaling: error: the $ranks-rank run failed:" >&2; tail -5 "$out/ranks$ranks.log" >&2; exit 1; }
done

# Median step time after the first 3 steps (first-touch allocations, thread start-up).
python3 - "$out" "$CORES" <<'PY'
import json, statistics, sys
out, cores = sys.argv[1], int(sys.argv[2])
def median_ms(ranks):
    steps = [json.loads(l) for l in open(f"{out}/ranks{ranks}.jsonl")]
    return statistics.median(s["ms"] for s in steps[3:] or steps)
t1, t2 = median_ms(1), median_ms(2)
print(f"cpu data parallel, {cores} cores in all, median step time")
print(f"| ranks | threads/rank | step ms | speed-up | efficiency |")
print(f"|---|---|---|---|---|")
print(f"| 1 | {cores} | {t1:.1f} | 1.00 | 100% |")
print(f"| 2 | {max(cores // 2, 1)} | {t2:.1f} | {t1 / t2:.2f} | {100 * t1 / (2 * t2):.0f}% |")
PY
