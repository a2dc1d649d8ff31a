# shellcheck shell=bash disable=SC2034,SC2317 # sets variables for its caller; helpers run via "$@"
# Sourced by scripts/bench-ikllama: ik_llama.cpp (github.com/ikawrakow/ik_llama.cpp, the
# llama.cpp fork with the iqk CPU kernels, run-time repacking and CPU flash attention) at a
# pinned commit, built with cmake from PyPI for the CPU it runs on, once, into
# target/ik-llama/<isa>/ (git-ignored), and reused after.
#
# The source is a checkout the user gives (--ik-src DIR or IK_LLAMA_SRC): the project's
# scripts reach only crates.io, PyPI, Debian and npm, so they cannot clone GitHub. The
# checkout is checked against the pinned commit by the git blob hashes of the files that
# decide the benchmark (build files, the iqk kernels, the model code, llama-bench), so a
# git clone, a GitHub tarball or a `git archive` of that commit all pass and nothing else
# does (--ik-unpinned builds another commit and says so in the output).
#
# Build options follow ik_llama.cpp's docs/build.md for speed on x86: GGML_NATIVE=ON
# (-march=native: only instructions this CPU has) with the GGML_AVX512_* options this CPU
# lists; `--isa avx2` (ik_isa_setup) builds with AVX, AVX2, FMA and F16C only (no
# -march=native, every AVX-512 and AVX-VNNI option off) into target/ik-llama/avx2/, the
# same emulation as scripts/lib/llama-cpp.bash's (the instruction set, not such a CPU).

# The pinned commit (main, 2026-08-15) and the git blob hash of each checked file at it.
IK_LLAMA_COMMIT=8337e4cd3861406fc04e0854b1409cd1b027fbc9
IK_LLAMA_URL=https://github.com/ikawrakow/ik_llama.cpp
IK_LLAMA_BLOBS="8eea1d54d2f32c9e16ffcb420bd37d1ad109a1cf CMakeLists.txt
cc42d8d0b8d37ec3f9963a434823bd50a254cc22 ggml/src/CMakeLists.txt
680f2639d4b7b5a37ab7e0f477b4b87cd388b2d6 ggml/src/iqk/iqk_mul_mat.cpp
f95043f9e274763aebb2f011ad4edf6c73c39b7b ggml/src/iqk/iqk_gemm_legacy_quants.cpp
8b481b103bfb11be51d6d1f9695c51942b95ca75 ggml/src/iqk/iqk_gemm_kquants.cpp
7945d9db81440d49c578ef626e0863a5fb5e70a2 src/llama.cpp
0dadf218e1a3eb2fbdc558a9a3ca8f7ccb40eb56 examples/llama-bench/llama-bench.cpp"
# cmake from PyPI, in its own environment.
IK_CMAKE_PIP="cmake==4.4.5"

# How to get the pinned source, for messages.
ik_how_to_get() {
  echo "get it with: git clone $IK_LLAMA_URL && git -C ik_llama.cpp checkout $IK_LLAMA_COMMIT" \
    "(or unpack $IK_LLAMA_URL/archive/$IK_LLAMA_COMMIT.tar.gz), then pass --ik-src <that directory>"
}

# ik_check_source WHO DIR UNPINNED: fail (exit 2) unless DIR holds ik_llama.cpp at the pinned
# commit, naming the first file that differs; with UNPINNED=1 only check that DIR looks
# like ik_llama.cpp. Sets `ik_source_id` (the commit, or "unpinned" and the differing files).
ik_check_source() {
  local who="$1" dir="$2" unpinned="$3" bad line
  if [ -z "$dir" ]; then
    echo "$who: needs the ik_llama.cpp source: --ik-src DIR or IK_LLAMA_SRC=DIR; $(ik_how_to_get)" >&2
    exit 2
  fi
  if [ ! -f "$dir/ggml/src/iqk/iqk_mul_mat.cpp" ] || [ ! -f "$dir/examples/llama-bench/llama-bench.cpp" ]; then
    echo "$who: $dir is not an ik_llama.cpp checkout (no ggml/src/iqk/iqk_mul_mat.cpp or examples/llama-bench/llama-bench.cpp); $(ik_how_to_get)" >&2
    exit 2
  fi
  # git's blob hash: sha1 of "blob <size>\0" and the bytes (no git needed).
  bad="$(IK_BLOBS="$IK_LLAMA_BLOBS" python3 - "$dir" <<'PY'
import hashlib, os, sys
root = sys.argv[1]
for line in os.environ["IK_BLOBS"].splitlines():
    want, path = line.split(" ", 1)
    try:
        data = open(os.path.join(root, path), "rb").read()
    except OSError as e:
        print(f"{path} (unreadable: {e.strerror})")
        continue
    have = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    if have != want:
        print(f"{path} (blob {have}, pinned {want})")
PY
)"
  if [ -z "$bad" ]; then
    ik_source_id="$IK_LLAMA_COMMIT"
  elif [ "$unpinned" = 1 ]; then
    ik_source_id="unpinned (differs from $IK_LLAMA_COMMIT in: $(echo "$bad" | cut -d' ' -f1 | paste -sd' '))"
  else
    echo "$who: $dir is not ik_llama.cpp at the pinned commit $IK_LLAMA_COMMIT; differing:" >&2
    while IFS= read -r line; do echo "  $line"; done <<<"$bad" >&2
    echo "$who: $(ik_how_to_get); or pass --ik-unpinned to build it as it is" >&2
    exit 2
  fi
}

# ik_isa_setup WHO ISA: for ISA `native` or `avx2`, set `ik_cmake` (the CMake options) and
# `ik_isa` (the build directory's name).
ik_isa_setup() {
  local who="$1" isa="$2" flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2-) "
  _ik_has() { case "$flags" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
  _ik_onoff() { if "$@"; then echo ON; else echo OFF; fi; }
  local base="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DGGML_CCACHE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF"
  case "$isa" in
    native)
      local avx512=OFF
      _ik_has avx512f && _ik_has avx512bw && _ik_has avx512vl && _ik_has avx512dq && avx512=ON
      _ik_sub512() { [ "$avx512" = ON ] && _ik_has "$1"; }
      ik_cmake="$base -DGGML_NATIVE=ON -DGGML_AVXVNNI=$(_ik_onoff _ik_has avx_vnni) -DGGML_AVX512=$avx512"
      ik_cmake="$ik_cmake -DGGML_AVX512_VBMI=$(_ik_onoff _ik_sub512 avx512vbmi)"
      ik_cmake="$ik_cmake -DGGML_AVX512_VNNI=$(_ik_onoff _ik_sub512 avx512_vnni)"
      ik_cmake="$ik_cmake -DGGML_AVX512_BF16=$(_ik_onoff _ik_sub512 avx512_bf16)"
      ;;
    avx2)
      local f
      for f in avx avx2 fma f16c; do
        _ik_has "$f" || { echo "$who: this CPU lacks $f: it cannot run an AVX2 build" >&2; exit 2; }
      done
      ik_cmake="$base -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
      ik_cmake="$ik_cmake -DGGML_AVXVNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"
      ;;
    *) echo "$who: --isa takes native or avx2, not $isa" >&2; exit 2 ;;
  esac
  ik_isa="$isa"
}

# ik_ensure_build ROOT WHO SRC: build llama-bench and llama-cli (for its system_info line)
# of SRC with `ik_cmake` into ROOT/target/ik-llama/$ik_isa, unless that directory was
# configured from SRC with those options (then only an incremental build, nothing to do
# when SRC is unchanged). Sets `ik_bin` (the directory of the executables). cmake comes
# from PyPI into ROOT/.venv-cmake; CMAKE_BUILD_PARALLEL_LEVEL (default 2) sets the jobs.
ik_ensure_build() {
  local root="$1" who="$2" src="$3" build stamp want
  src="$(cd "$src" && pwd)"
  build="$root/target/ik-llama/$ik_isa"
  stamp="$build/genai-build-stamp"
  local cmake="$root/.venv-cmake/bin/cmake"
  mkdir -p "$root/target/ik-llama"
  if ! [ -x "$cmake" ] || ! "$cmake" --version >/dev/null 2>&1; then
    echo "$who: installing $IK_CMAKE_PIP from PyPI into .venv-cmake" >&2
    rm -rf "$root/.venv-cmake"
    python3 -m venv "$root/.venv-cmake"
    "$root/.venv-cmake/bin/pip" install --no-cache-dir --quiet --disable-pip-version-check "$IK_CMAKE_PIP"
  fi
  want="source $src; $ik_cmake"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    # A build directory configured from another source directory cannot be reconfigured.
    if [ -f "$build/CMakeCache.txt" ] && ! grep -qx "CMAKE_HOME_DIRECTORY:INTERNAL=$src" "$build/CMakeCache.txt"; then
      echo "$who: target/ik-llama/$ik_isa was configured from another source directory; removing it" >&2
      rm -rf "$build"
    fi
    echo "$who: configuring ik_llama.cpp ($src) into target/ik-llama/$ik_isa with $ik_cmake" >&2
    rm -f "$stamp"
    # shellcheck disable=SC2086 # ik_cmake is a list of options
    "$cmake" -S "$src" -B "$build" $ik_cmake >"$build.configure.log" 2>&1 \
      || { echo "$who: cmake configure failed; see $build.configure.log" >&2; exit 1; }
  fi
  echo "$who: building ik_llama.cpp llama-bench and llama-cli (the first time: many minutes; its iqk kernel files are large)" >&2
  "$cmake" --build "$build" --target llama-bench llama-cli -j "${CMAKE_BUILD_PARALLEL_LEVEL:-2}" >"$build.build.log" 2>&1 \
    || { echo "$who: build failed; see $build.build.log" >&2; tail -20 "$build.build.log" >&2; exit 1; }
  printf '%s\n' "$want" >"$stamp"
  ik_bin="$build/bin"
}
