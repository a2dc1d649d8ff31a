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
#
# `--isa avx2` (llama_isa_setup) emulates an AVX2-only CPU on a CPU that has more: llama.cpp
# built with SSE4.2, AVX, AVX2, FMA, F16C and BMI2 only (AVX-512, AVX-VNNI and AMX off) into
# its own environment, .venv-bench-avx2, so that both builds stay side by side, and genai
# run with GENAI_ISA=avx2. The same instruction set, not an AVX2-only CPU: the caches,
# memory and clock are this machine's, and the AVX-512 units may still change the clock.

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

# The GGML CMake options for an AVX2-only CPU (AVX2, FMA, F16C, BMI2 and below; every
# AVX-512 option, AVX-VNNI and AMX off), one line. Fails unless this CPU has those.
llama_cmake_args_avx2() {
  local flags f
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2-) "
  for f in sse4_2 avx avx2 fma f16c bmi2; do
    case "$flags" in *" $f "*) ;; *) echo "this CPU lacks $f: it cannot run an AVX2 build" >&2; return 1 ;; esac
  done
  echo "-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON" \
    "-DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF" \
    "-DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF" \
    "-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
}

# llama_isa_setup ROOT WHO ISA: for ISA `native` (this CPU's full set) or `avx2` (an
# AVX2-only CPU emulated), set `venv` (the environment's path), `llama_cmake` (its GGML
# options) and `isa_note` (one line saying which instruction set each side runs), and
# export GENAI_ISA=avx2 for `avx2`. WHO names the calling script in messages.
llama_isa_setup() {
  local root="$1" who="$2" isa="$3"
  case "$isa" in
    native)
      venv="$root/.venv-bench"
      llama_cmake="${CMAKE_ARGS:-$(llama_cmake_args_for_cpu)}"
      isa_note="instruction sets: this CPU's own on both sides"
      ;;
    avx2)
      venv="$root/.venv-bench-avx2"
      llama_cmake="$(llama_cmake_args_avx2)" || exit 2
      export GENAI_ISA=avx2
      isa_note="instruction sets: AVX2 (+FMA, F16C) on both sides, EMULATED on a CPU that has more ($(llama_cpu_simd_summary)): genai GENAI_ISA=avx2, llama.cpp built without AVX-512/AVX-VNNI; not an AVX2-only CPU (caches, memory and clock are this machine's)"
      ;;
    *) echo "$who: --isa takes native or avx2, not $isa" >&2; exit 2 ;;
  esac
}

# The widest SIMD sets /proc/cpuinfo lists, e.g. "avx512f avx512_vnni avx2".
llama_cpu_simd_summary() {
  local flags out="" f
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2-) "
  for f in avx512f avx512_vnni avx_vnni avx2; do
    case "$flags" in *" $f "*) out="$out $f" ;; esac
  done
  echo "${out# }"
}

# ensure_llama_venv VENV WHO IMPORT-CHECK [OPTIONS]: (re)build VENV unless it imports
# IMPORT-CHECK and was built with OPTIONS (default: this CPU's option set, or CMAKE_ARGS
# when that is set). WHO names the calling script in messages.
ensure_llama_venv() {
  local venv="$1" who="$2" check="$3" want="${4:-}" have="" name
  name="$(basename "$venv")"
  [ -n "$want" ] || want="${CMAKE_ARGS:-$(llama_cmake_args_for_cpu)}"
  [ -f "$venv/ggml-cmake-args" ] && have="$(cat "$venv/ggml-cmake-args")"
  if [ -x "$venv/bin/python" ] && [ "$have" = "$want" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    return 0
  fi
  if [ -e "$venv" ]; then
    echo "$who: $name was built with other llama.cpp options (${have:-none recorded}); rebuilding" >&2
    rm -rf "$venv"
  fi
  echo "$who: installing llama-cpp-python[server] into $name (compiles llama.cpp: minutes) with $want" >&2
  python3 -m venv "$venv"
  CMAKE_ARGS="$want" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    "$venv/bin/pip" install --no-cache-dir --quiet --disable-pip-version-check "llama-cpp-python[server]==0.3.36"
  printf '%s\n' "$want" >"$venv/ggml-cmake-args"
}
