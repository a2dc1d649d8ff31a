# Sourced by scripts/bench-llamacpp and scripts/bench-serve: llama-cpp-python 0.3.36 (from
# PyPI, compiling its llama.cpp) in a virtual environment built for the CPU it runs on.
#
# llama.cpp is built with GGML_NATIVE=OFF and every x86 instruction-set option named: each
# on exactly when /proc/cpuinfo lists the features its compiler flags need, so the build
# never uses an instruction this CPU lacks (an AVX-512 build on an AVX2-only CPU dies of
# SIGILL at its first evaluation). AMX stays off everywhere: where the kernel or the
# hypervisor does not grant the tile state the first evaluation dies of SIGILL even on a
# CPU that lists it (a native build would switch it on).
#
# The option set is recorded in the environment's `ggml-cmake-args`; an environment built
# with another set (another CPU, or a CMAKE_ARGS given by hand) is removed and rebuilt.

# The GGML CMake options for this CPU, one line.
llama_cmake_args_for_cpu() {
  local flags
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2-) "
  _llama_has() { case "$flags" in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
  _llama_onoff() { if "$@"; then echo ON; else echo OFF; fi; }
  _llama_all() { local f; for f in "$@"; do _llama_has "$f" || return 1; done; }
  # GGML_AVX512 compiles with -mavx512f -mavx512cd -mavx512vl -mavx512dq -mavx512bw; its
  # VBMI, VNNI and BF16 options only add to it.
  local avx512
  avx512="$(_llama_onoff _llama_all avx512f avx512cd avx512vl avx512dq avx512bw)"
  _llama_sub512() { [ "$avx512" = ON ] && _llama_has "$1"; }
  echo "-DGGML_NATIVE=OFF" \
    "-DGGML_SSE42=$(_llama_onoff _llama_has sse4_2)" \
    "-DGGML_AVX=$(_llama_onoff _llama_has avx)" \
    "-DGGML_AVX2=$(_llama_onoff _llama_has avx2)" \
    "-DGGML_FMA=$(_llama_onoff _llama_has fma)" \
    "-DGGML_F16C=$(_llama_onoff _llama_has f16c)" \
    "-DGGML_BMI2=$(_llama_onoff _llama_has bmi2)" \
    "-DGGML_AVX_VNNI=$(_llama_onoff _llama_has avx_vnni)" \
    "-DGGML_AVX512=$avx512" \
    "-DGGML_AVX512_VBMI=$(_llama_onoff _llama_sub512 avx512vbmi)" \
    "-DGGML_AVX512_VNNI=$(_llama_onoff _llama_sub512 avx512_vnni)" \
    "-DGGML_AVX512_BF16=$(_llama_onoff _llama_sub512 avx512_bf16)" \
    "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
}

# ensure_llama_venv VENV WHO IMPORT-CHECK: (re)build VENV unless it imports IMPORT-CHECK
# and was built with this CPU's option set (or CMAKE_ARGS when that is set). WHO names the
# calling script in messages.
ensure_llama_venv() {
  local venv="$1" who="$2" check="$3" want have=""
  want="${CMAKE_ARGS:-$(llama_cmake_args_for_cpu)}"
  [ -f "$venv/ggml-cmake-args" ] && have="$(cat "$venv/ggml-cmake-args")"
  if [ -x "$venv/bin/python" ] && [ "$have" = "$want" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    return 0
  fi
  if [ -e "$venv" ]; then
    echo "$who: .venv-bench was built with other llama.cpp options (${have:-none recorded}); rebuilding" >&2
    rm -rf "$venv"
  fi
  echo "$who: installing llama-cpp-python[server] into .venv-bench (compiles llama.cpp: minutes) with $want" >&2
  python3 -m venv "$venv"
  CMAKE_ARGS="$want" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    "$venv/bin/pip" install --no-cache-dir --quiet --disable-pip-version-check "llama-cpp-python[server]==0.3.36"
  printf '%s\n' "$want" >"$venv/ggml-cmake-args"
}
