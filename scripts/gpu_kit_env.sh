# Sourced, not run: unpacks the GPU kit (.kit/, made by scripts/gpu_kit.sh) into a private prefix
# and points the build and the programs at it. Used by scripts/gpu_check.sh on a bare GPU machine,
# and by scripts/gpu_kit_test.sh here to prove the kit is complete.
#
#   source scripts/gpu_kit_env.sh KIT_DIR ROOT      (e.g. .kit build-gpu/kit-root)
#
# Nothing is written outside ROOT: each .deb is extracted (dpkg-deb -x, or ar + tar where dpkg is
# missing) into ROOT, never installed. Afterwards:
#   CMAKE_PREFIX_PATH  ROOT/usr first (CMake configs of spdlog, fmt, json, CLI11, Boost, GTest;
#                      CMakeLists.txt looks for OpenBLAS's openmp build under it too)
#   PATH               ROOT/usr/bin with mpicxx/mpirun links (Debian makes them with
#                      update-alternatives at install time, which an extraction does not run)
#   OPAL_PREFIX        ROOT/usr: the relocated OpenMPI finds its plugins, help files and wrapper data
#   PMIX_INSTALL_PREFIX  the same for its PMIx
#   LD_LIBRARY_PATH    the kit's library directories
# Runtime-class libraries (MANIFEST.txt) whose soname this machine's loader already knows are
# removed from ROOT, so that the machine's own copies (matched to its glibc and compiler) are used
# (GLASS_KIT_KEEP_RUNTIME=1 keeps them all: the kit test here, where every library is installed).
# Returns non-zero (with a message) when the kit is missing or this machine's glibc is older than
# what the kit's build-class packages need.
gpu_kit_env() {
  local kit=$1 root=$2 arch deb f soname line
  [[ -f "$kit/MANIFEST.txt" ]] || { echo "gpu_kit_env: no $kit/MANIFEST.txt (run scripts/gpu_kit.sh where apt works)"; return 1; }
  mkdir -p "$root"
  root=$(cd "$root" && pwd)
  kit=$(cd "$kit" && pwd)
  arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  [[ -n "$arch" ]] || arch=x86_64-linux-gnu
  # 1. glibc: the newest symbol version each package needs against the one this machine has
  local have too_new=()
  have=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9]\+\.[0-9]\+$')
  while read -r class pkg version glibc _; do
    [[ "$class" == \#* || "$glibc" == - || -z "$have" ]] && continue
    [[ "$(printf '%s\n%s\n' "$glibc" "$have" | sort -V | tail -1)" == "$have" ]] || too_new+=("$pkg($class, glibc $glibc)")
  done <"$kit/MANIFEST.txt"
  if ((${#too_new[@]})); then
    echo "gpu_kit_env: this machine has glibc $have; these kit packages need newer: ${too_new[*]}"
    grep -q "(build," <<<"${too_new[*]}" && return 1
  fi
  # 2. unpack every package (once: a marker per .deb); runtime libraries whose soname this
  #    machine's loader knows are dropped, so that its own copies are used
  local known tmp
  known=$(ldconfig -p 2>/dev/null | awk 'NR > 1 {print $1}')
  while read -r class pkg version glibc bytes sha file; do
    [[ "$class" == \#* ]] && continue
    deb="$kit/$file"
    [[ -f "$deb" ]] || { echo "gpu_kit_env: $deb is listed in the manifest but missing"; return 1; }
    [[ -f "$root/.unpacked/$(basename "$deb")" ]] && continue
    # build packages straight into ROOT; runtime ones through a scratch directory first
    tmp=$root
    [[ "$class" == runtime ]] && tmp=$(mktemp -d)
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$deb" "$tmp" || return 1
    else
      (cd "$tmp" && ar x "$deb" && tar -xf data.tar.* && rm -f data.tar.* control.tar.* debian-binary) || return 1
    fi
    if [[ "$class" == runtime ]]; then
      while read -r f; do
        soname=$(basename "$f")
        soname="${soname%%.so.*}.so.${soname#*.so.}"
        soname="${soname%%.so.*}.so.$(cut -d. -f1 <<<"${soname#*.so.}")"
        [[ -z "${GLASS_KIT_KEEP_RUNTIME:-}" ]] && grep -qxF "$soname" <<<"$known" && rm -f "$f"
      done < <(find "$tmp" -name '*.so.*' \( -type f -o -type l \))
    fi
    if [[ "$tmp" != "$root" ]]; then cp -a "$tmp/." "$root/" && rm -rf "$tmp"; fi
    mkdir -p "$root/.unpacked" && touch "$root/.unpacked/$(basename "$deb")"
  done <"$kit/MANIFEST.txt"
  # 3. the links update-alternatives would have made
  for f in mpicxx mpic++ mpicc mpirun mpiexec; do
    [[ -e "$root/usr/bin/$f.openmpi" && ! -e "$root/usr/bin/$f" ]] && ln -s "$f.openmpi" "$root/usr/bin/$f"
  done
  [[ -e "$root/usr/lib/$arch/openmpi/include" && ! -e "$root/usr/include/$arch/mpi" ]] &&
    mkdir -p "$root/usr/include/$arch" && ln -s "../../lib/$arch/openmpi/include" "$root/usr/include/$arch/mpi"
  # 4. the environment
  export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PATH="$root/usr/bin:$PATH"
  export OPAL_PREFIX="$root/usr"
  export PMIX_INSTALL_PREFIX="$root/usr/lib/$arch/pmix2"
  export LD_LIBRARY_PATH="$root/usr/lib/$arch:$root/usr/lib/$arch/openmpi/lib:$root/usr/lib/$arch/pmix2/lib:$root/usr/lib/$arch/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GLASS_KIT_ROOT="$root"
  echo "gpu_kit_env: $(grep -vc '^#' "$kit/MANIFEST.txt") packages in $root ($(du -sh "$root" | cut -f1))"
}
gpu_kit_env "$@"
