#!/usr/bin/env bash
# scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]: runs each libFuzzer target of tests/fuzz for
# SECONDS (make fuzz). Each starts from its committed corpus (tests/fuzz/corpus/<t>) and grows a
# working corpus in BUILD_DIR/corpus/<t>; a crashing input is written to BUILD_DIR/crashes/ and
# the script ends non-zero. The last line of each run (executions, coverage, corpus size) is
# printed as a summary at the end.
set -euo pipefail
build=${1:?usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:-60}
shift 2 || true
root=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors checkpoint latest shard text cli gpt_weights gpt2_vocab llmc_tokenizer)
mkdir -p "$build/crashes"
# Stack traces need llvm-symbolizer named by its real path: found through PATH, Debian's
# /usr/bin/llvm-symbolizer symlink is refused ("invalid path to external symbolizer").
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && command -v llvm-symbolizer >/dev/null; then
  ASAN_SYMBOLIZER_PATH=$(readlink -f "$(command -v llvm-symbolizer)")
  export ASAN_SYMBOLIZER_PATH
fi
summary=""
status=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  mkdir -p "$work"
  log="$build/fuzz_$t.log"
  echo "fuzz_$t: ${seconds}s"
  # -rss_limit_mb: an input that makes a loader allocate gigabytes is a finding too.
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" \
      "$work" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1; then
    echo "fuzz_$t FOUND A PROBLEM: see $log and $build/crashes/"
    status=1
  fi
  summary+="fuzz_$t: $(grep -E '^#[0-9]+' "$log" | tail -1 || true)"$'\n'
  summary+="  $(grep -E 'stat::number_of_executed_units' "$log" || true)"$'\n'
done
printf '\n%s' "$summary"
exit $status
