#!/usr/bin/env bash
# Regenerates the step explorer's screenshots in docs/ (docs/profiling.md and docs/tour.md show
# them): the tour's run (the default model, step 2 recorded) with --report, each section of the
# page photographed alone by headless Chromium (the page's "#only=<section>" hides the others).
#   scripts/explorer_screenshots.sh [build dir, default build]
# Needs a built samples/train_gpt and chromium (scripts/setup.sh --test installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[[ -n "$chromium" ]] || { echo "explorer_screenshots: chromium not found (scripts/setup.sh --test)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/samples/train_gpt" --device cpu --steps 3 --eval-every 1 --eval-batches 1 --sample 0 \
  --profile-steps 2:2 --report "$out/report.html" --quiet > "$out/log.txt"
flags=(--headless --disable-gpu --hide-scrollbars --no-first-run)
[[ $(id -u) -eq 0 ]] && flags+=(--no-sandbox)  # Chromium refuses its sandbox as root
# section height (px): each picture shows its section and no more
for shot in summary:340 timeline:400 tape:560 memory:640 roofline:700 kernels:720; do
  name=${shot%%:*}
  "$chromium" "${flags[@]}" --window-size=1280,"${shot##*:}" \
    --screenshot="docs/explorer_$name.png" "file://$out/report.html#only=$name" 2>/dev/null
  echo "docs/explorer_$name.png"
done
