# Sourced by scripts/battery and .ci/run: the admission battery's default run settings.
#
# Switch mode (one build in a scratch copy, one test run per mutant) with two mutants' tests
# at once, unless the arguments already choose a mode (`--mode`) or a job count (`-j`,
# `--jobs`). The two modes give the same verdicts and kill matrix on the admission catalog
# (scripts/compare-modes checks it; docs/design.md §3.2 gives the figures).

# Prints the default arguments the given arguments do not override, one per line: `-j 2`
# goes with switch mode only (rebuild mode takes one job).
battery_default_args() {
  local mode="" jobs=0 prev="" a
  for a in "$@"; do
    case "$a" in
      --mode=*) mode="${a#--mode=}" ;;
      -j | -j* | --jobs | --jobs=*) jobs=1 ;;
    esac
    if [ "$prev" = --mode ]; then mode="$a"; fi
    prev="$a"
  done
  if [ -z "$mode" ]; then
    printf '%s\n' --mode switch
    mode=switch
  fi
  if [ "$jobs" = 0 ] && [ "$mode" = switch ]; then printf '%s\n' -j 2; fi
}
