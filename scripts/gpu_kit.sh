#!/usr/bin/env bash
# The GPU kit: the Debian packages glass builds against, downloaded HERE (a machine with apt and the
# packages' repositories) into .kit/ (git-ignored), for a lent GPU machine that has nvcc, CMake, a
# C++ compiler and PyTorch but none of them. scripts/gpu_check.sh unpacks the kit into a private
# prefix there (never into /) and builds against it; `run` carries .kit/ to the device machine.
#
#   scripts/gpu_kit.sh [--out .kit]     (a .deb already in .kit/debs is kept: rm -r .kit to refresh)
#
# What goes in:
#   build    the -dev packages CMakeLists.txt finds (headers, CMake configs, the .so links) and the
#            libraries and programs they name: spdlog, fmt, nlohmann-json, CLI11, Boost.Context,
#            OpenBLAS (OpenMP build), OpenMPI (mpicxx for FindMPI, mpirun), GoogleTest/GoogleMock;
#   runtime  every shared library those need, found by following the NEEDED entries of each ELF
#            file in the kit (OpenMPI's plugins included) to the package that ships the library
#            here, until nothing new appears. gpu_check.sh uses a runtime library only when the GPU
#            machine's loader does not already know its soname (ldconfig -p).
# Never shipped: libc6, libgcc-s1, libstdc++6, libgomp1 (the GPU machine's own compiler and its
# OpenMP runtime provide them; a second libgomp would shadow the one the compiler links).
# .kit/MANIFEST.txt lists every package: class, version, the newest glibc symbol version its ELF
# files need (gpu_check.sh compares it with the GPU machine's glibc and names the packages that
# will not load there), size and sha256.
set -euo pipefail
cd "$(dirname "$0")/.."

out=.kit
while (($#)); do
  case "$1" in
    --out) out=$2; shift 2 ;;
    *) echo "gpu_kit: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  { echo "gpu_kit: needs apt-get and dpkg-deb (a Debian machine)" >&2; exit 1; }

build_packages=(
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev
  libboost1.74-dev libboost-context1.74-dev libboost-context1.74.0 libboost-context-dev
  libopenblas-dev libopenblas0 libopenblas0-openmp libopenblas-openmp-dev
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common
  libgtest-dev libgmock-dev
  libpcre2-dev libpcre2-8-0
)
never=(libc6 libgcc-s1 libstdc++6 libgomp1)

mkdir -p "$out/debs"
rm -rf "$out/unpacked"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

declare -A class  # package -> build | runtime
owner() {  # the package that ships a library file, under any of its names (usrmerge: /lib = /usr/lib)
  local real f
  real=$(readlink -f "$1")
  for f in "$1" "$real" "${1#/usr}" "/usr${1#/usr}" "${real#/usr}" "/usr${real#/usr}"; do
    dpkg -S "$f" 2>/dev/null | head -1 | cut -d: -f1 | grep . && return 0
  done
  return 0
}
download() {  # download PACKAGE... into $out/debs (unless there already) and unpack into $stage
  local missing=() p
  for p in "$@"; do compgen -G "$out/debs/${p}_*.deb" >/dev/null || missing+=("$p"); done
  if ((${#missing[@]})); then
    (cd "$out/debs" && apt-get download -q "${missing[@]}" 2>&1 >/dev/null | grep -v unsandboxed) || true
  fi
  for p in "$@"; do
    compgen -G "$out/debs/${p}_*.deb" >/dev/null ||
      { echo "gpu_kit: apt-get download $p failed (apt-get update first?)" >&2; exit 1; }
  done
  for p in "$@"; do
    local deb
    deb=$(ls "$out/debs/${p}_"*.deb | head -1)
    dpkg-deb -x "$deb" "$stage"
  done
}
echo "gpu_kit: downloading ${#build_packages[@]} build packages"
for p in "${build_packages[@]}"; do class[$p]=build; done
download "${build_packages[@]}"

# The runtime closure: NEEDED sonames of every ELF file in the kit that no file of the kit provides,
# mapped to the package that ships them on this machine; repeated until nothing new comes in.
while true; do
  mapfile -t elfs < <(find "$stage" -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c \
    'head -c4 "$1" | grep -q "ELF" && echo "$1"' _ {} \;)
  provided=$(find "$stage" -name '*.so*' -printf '%f\n' | sort -u)
  needed=$(for f in "${elfs[@]}"; do readelf -d "$f" 2>/dev/null; done |
    sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort -u)
  new=()
  for soname in $needed; do
    grep -qxF "$soname" <<<"$provided" && continue
    path=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ && !p {p = $NF} END {print p}')
    if [[ -z "$path" ]]; then
      echo "gpu_kit: note: $soname is needed but not installed here (left out)" >&2
      continue
    fi
    pkg=$(owner "$path")
    [[ -n "$pkg" ]] || { echo "gpu_kit: note: no package ships $path (left out)" >&2; continue; }
    [[ " ${never[*]} " == *" $pkg "* || -n "${class[$pkg]:-}" ]] && continue
    class[$pkg]=runtime
    new+=("$pkg")
  done
  ((${#new[@]})) || break
  mapfile -t new < <(printf '%s\n' "${new[@]}" | sort -u)
  echo "gpu_kit: runtime libraries: ${new[*]}"
  download "${new[@]}"
done

# The newest glibc symbol version the ELF files of a .deb need ("-" when it has none).
glibc_of() {
  local dir
  dir=$(mktemp -d)
  dpkg-deb -x "$1" "$dir"
  local v
  v=$(find "$dir" -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} + 2>/dev/null |
    grep -o 'GLIBC_[0-9.]*[0-9]' | sed 's/GLIBC_//' | sort -uV | tail -1) || true
  rm -rf "$dir"
  echo "${v:--}"
}

{
  echo "# glass GPU kit: Debian packages for scripts/gpu_check.sh (made by scripts/gpu_kit.sh)"
  echo "# made $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release && echo "$PRETTY_NAME"), $(dpkg --print-architecture)"
  echo "# class package version glibc-needed bytes sha256 file"
  for p in "${!class[@]}"; do
    deb=$(ls "$out/debs/${p}_"*.deb | head -1)
    printf '%s %s %s %s %s %s %s\n' "${class[$p]}" "$p" "$(dpkg-deb -f "$deb" Version)" \
      "$(glibc_of "$deb")" "$(stat -c %s "$deb")" "$(sha256sum "$deb" | cut -d' ' -f1)" \
      "debs/$(basename "$deb")"
  done | sort
} >"$out/MANIFEST.txt"
glibc=$(awk '!/^#/ && $4 != "-" {print $4}' "$out/MANIFEST.txt" | sort -V | tail -1)
# Only what the manifest lists (a package dropped from the lists above leaves no stale .deb).
for deb in "$out"/debs/*.deb; do
  grep -qF " debs/$(basename "$deb")" "$out/MANIFEST.txt" || rm -f "$deb"
done
n=$(grep -vc '^#' "$out/MANIFEST.txt")
echo "gpu_kit: $n packages, $(du -sh "$out/debs" | cut -f1) in $out/debs, $(du -sh "$stage" | cut -f1) unpacked; glibc >= $glibc needed"
