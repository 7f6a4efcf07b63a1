#!/usr/bin/env bash
# Benchmark: what train_gpt --recompute costs and saves on `cpu` with the default model (L=4 H=4
# C=256 T=128 B=16, f32): the median step time of each mode and the peak allocated bytes of the
# run (the allocator's, from --metrics), against --recompute none.
#
# On a shared machine the load moves step times from minute to minute, so the modes are
# interleaved: each round runs none, gelu, mlp, block one after the other, and the ratio of a
# mode to none is taken within the round; the median over rounds is printed. The load average is
# printed before and after.
#   bench/recompute.sh [--threads N] [--steps N] [--warmup N] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."

threads=2 steps=10 warmup=2 rounds=3
while (($#)); do
  case "$1" in
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --warmup) warmup=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "bench/recompute.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin="${BUILD:-build}/samples/train_gpt"
[[ -x $bin ]] || { echo "bench/recompute.sh: build $bin first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
modes=(none gelu mlp block)
for ((r = 1; r <= rounds; r++)); do
  for mode in "${modes[@]}"; do
    rm -f "$tmp/m.jsonl"
    "$bin" --device cpu --dtype f32 --threads "$threads" --steps $((steps + warmup)) \
      --eval-every 0 --eval-batches 1 --sample 0 --quiet --lr-schedule constant \
      --recompute "$mode" --metrics "$tmp/m.jsonl" >/dev/null
    # The median ms of the timed steps, and the run's peak allocated bytes.
    python3 - "$tmp/m.jsonl" "$warmup" "$mode" "$r" >>"$tmp/rows" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
timed = [x["ms"] for x in rows[int(sys.argv[2]):]]
print(sys.argv[4], sys.argv[3], statistics.median(timed), rows[-1]["peak_allocated_bytes"])
EOF
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/rows" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r, mode, ms, peak in rows:
    by.setdefault(mode, []).append((int(r), float(ms), int(peak)))
none = {r: (ms, peak) for r, ms, peak in by["none"]}
print(f"{'mode':<6} {'ms/step (rounds)':<30} {'x none (median)':>16} {'peak alloc MiB':>15} {'x none':>7}")
for mode, vals in by.items():
    ratios = [ms / none[r][0] for r, ms, _ in vals]
    peak = vals[-1][2]
    print(f"{mode:<6} {', '.join(f'{ms:.1f}' for _, ms, _ in vals):<30} "
          f"{statistics.median(ratios):>16.3f} {peak / 2**20:>15.1f} {peak / none[1][1]:>7.3f}")
EOF
