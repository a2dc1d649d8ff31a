# Sourced by scripts/battery and .ci/run: the admission battery's default run settings.
#
# No `--mode`: the harness chooses by the selection's size (`auto`: switch mode, one build in
# a scratch copy and one test run per mutant, for the whole catalog; rebuild mode for a
# handful given with `--only`; docs/battery-report.md, "The mode chosen by size"). Two
# mutants' tests at once (`-j 2`) unless the arguments already choose a job count (`-j`,
# `--jobs`) or rebuild mode, which takes one job (chosen by size, rebuild mode runs one job
# whatever `-j` says). The two modes give the same verdicts and kill matrix on the admission
# catalog (scripts/compare-modes checks it; docs/design.md §3.2 gives the figures).

# Prints the default arguments the given arguments do not override, one per line.
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
  if [ "$jobs" = 0 ] && [ "$mode" != rebuild ]; then printf '%s\n' -j 2; fi
}
