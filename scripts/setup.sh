#!/usr/bin/env bash
# Installs the Debian packages glass needs that are not installed yet.
#   scripts/setup.sh          build + run (compiler, cmake, spdlog, OpenBLAS, json, CLI11, Boost.Context)
#   scripts/setup.sh --test   also the test tools (GoogleTest, Google Benchmark, PyTorch as oracle)
set -euo pipefail

packages=(g++ cmake make libspdlog-dev libfmt-dev libopenblas-dev libopenblas0-openmp
          nlohmann-json3-dev libcli11-dev libboost-context-dev)
# OpenMPI: mpirun starts data-parallel jobs; the mpi and nccl communicators are built on it.
packages+=(libopenmpi-dev openmpi-bin)
if [[ "${1:-}" == "--test" ]]; then
  # PyTorch 1.13 (CPU) is the reference for whole-model tests and the benchmark.
  # (libopenblas0-pthread: without it PyTorch falls back to the reference BLAS, ten times slower.)
  packages+=(libgtest-dev libgmock-dev libbenchmark-dev python3-torch python3-numpy libopenblas0-pthread)
  packages+=(gdb)  # tests/gdb runs docs/debugging.md's walkthrough (builds with debug info)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
