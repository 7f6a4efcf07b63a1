#!/usr/bin/env bash
# ZeRO-1 (docs/distributed.md): train_gpt with 2 ranks, --zero 0 against --zero 1, on the same
# global batch. Prints each rank's optimizer state (what the optimizer holds: AdamW's moments, 8 N
# bytes unsharded, 8 ceil(N / 2) sharded, and under bf16 the f32 masters too, 12 N against
# 12 ceil(N / 2); from the run's log), rank 0's measured peak of allocated memory (metrics), whose
# difference is what the sharding saved, and the median step time.
#
#   bench/zero_memory.sh                    # BUILD=build, cpu, f32, the default model, 12 steps
#   BUILD=/tmp/b STEPS=6 ARGS="--n-layer 2" bench/zero_memory.sh
#   DEVICE=emu DTYPE=bf16 STEPS=3 ARGS="--seq-len 32" bench/zero_memory.sh   # 2 emulated GPUs
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STEPS=${STEPS:-12}
ARGS=${ARGS:-}
DEVICE=${DEVICE:-cpu}
DTYPE=${DTYPE:-f32}
CORES=${CORES:-$(nproc)}
TRAIN="$BUILD/samples/train_gpt"
[[ -x "$TRAIN" ]] || { echo "zero_memory: error: $TRAIN not found (build first, or set BUILD)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
threads=$(( CORES / 2 > 0 ? CORES / 2 : 1 ))

for zero in 0 1; do
  GLASS_EMU_GPUS=2 OMP_NUM_THREADS=$threads mpirun --allow-run-as-root --oversubscribe -np 2 \
    "$TRAIN" --device "$DEVICE" --dtype "$DTYPE" --steps "$STEPS" --threads "$threads" \
    --sample 0 --eval-every 0 --quiet \
    --zero "$zero" --metrics "$out/zero$zero.jsonl" $ARGS > "$out/zero$zero.log" 2>&1 \
    || { echo "zero_memory: error: the --zero $zero run failed:" >&2; tail -5 "$out/zero$zero.log" >&2; exit 1; }
done

python3 - "$out" "$DEVICE" "$DTYPE" <<'PY'
import json, re, statistics, sys
out, device, dtype = sys.argv[1:4]
def run(zero):
    steps = [json.loads(l) for l in open(f"{out}/zero{zero}.jsonl")]
    log = open(f"{out}/zero{zero}.log").read()
    ms = statistics.median(s["ms"] for s in steps[3:] or steps)
    peak = max(s["peak_allocated_bytes"] for s in steps)
    m = re.search(r"ZeRO-1: AdamW moments(?: and f32 master weights)? ([0-9.]+) MiB on each rank "
                  r"\((\d+) of (\d+)", log)
    return ms, peak, m
ms0, peak0, _ = run(0)
ms1, peak1, m = run(1)
if m is None:
    sys.exit("zero_memory: error: the --zero 1 run did not log its moments")
shard, params = int(m.group(2)), int(m.group(3))
mib = 1 << 20
per = 8 if dtype == "f32" else 12  # m, v (and the f32 masters under bf16), 4 bytes each
mom0, mom1 = per * params / mib, per * shard / mib
what = "AdamW moments" if dtype == "f32" else "moments + f32 masters"
print(f"2 ranks, {device}, {dtype}, {params} parameters; per rank")
print(f"| --zero | {what} MiB | peak allocated MiB (rank 0) | step ms (median) |")
print("|---|---|---|---|")
print(f"| 0 | {mom0:.2f} | {peak0 / mib:.2f} | {ms0:.1f} |")
print(f"| 1 | {mom1:.2f} | {peak1 / mib:.2f} | {ms1:.1f} |")
print(f"optimizer state cut {100 * (1 - mom1 / mom0):.1f}%; peak cut {(peak0 - peak1) / mib:.2f} "
      f"MiB (state saved: {mom0 - mom1:.2f} MiB); step time {100 * (ms1 / ms0 - 1):+.1f}%")
PY
