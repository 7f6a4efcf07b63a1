#!/usr/bin/env bash
# Benchmark: what the step explorer (train_gpt --report) costs a learner who opens it. Trains the
# default model for --steps steps on cpu with --report (every step's loss on the curve, step 2
# profiled), then renders the page in headless Chromium --rounds times and prints the file's size
# and the page's own drawing time: `data-render-ms` on <body>, performance.now() when the last
# section is drawn, i.e. from the start of navigation (parsing the embedded data included) to a
# page that is ready to use. The issue's bound: under 1 s to open and under 5 MB for 600 steps.
#   bench/explorer_render.sh [--steps N] [--rounds N] [--keep DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

steps=600 rounds=3 keep=""
while (($#)); do
  case "$1" in
    --steps) steps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    *) echo "bench/explorer_render.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bin="${BUILD:-build}/samples/train_gpt"
[[ -x $bin ]] || { echo "bench/explorer_render.sh: build $bin first" >&2; exit 2; }
chromium=$(command -v chromium || command -v chromium-browser || true)
[[ -n $chromium ]] || { echo "bench/explorer_render.sh: needs chromium (scripts/setup.sh --test)" >&2; exit 2; }
tmp=${keep:-$(mktemp -d)}
mkdir -p "$tmp"
[[ -n $keep ]] || trap 'rm -rf "$tmp"' EXIT
sandbox=()
[[ $(id -u) == 0 ]] && sandbox=(--no-sandbox)  # Chromium refuses its sandbox as root

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$bin" --steps "$steps" --sample 0 --report "$tmp/r.html" > "$tmp/train.log" 2>&1
echo "report of $steps steps: $(stat -c %s "$tmp/r.html") bytes"
for ((r = 1; r <= rounds; r++)); do
  start=$(date +%s.%N)
  "$chromium" --headless --disable-gpu --no-first-run "${sandbox[@]}" \
    --allow-file-access-from-files --dump-dom "file://$tmp/r.html" 2> /dev/null > "$tmp/dom.html"
  wall=$(echo "$(date +%s.%N) - $start" | bc)
  ms=$(grep -o 'data-render-ms="[0-9.]*"' "$tmp/dom.html" | grep -o '[0-9.]*' || echo "?")
  ready=$(grep -c 'data-ready="1"' "$tmp/dom.html" || true)
  echo "round $r: drawn in $ms ms (page ready: $ready), chromium's whole run ${wall} s"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
