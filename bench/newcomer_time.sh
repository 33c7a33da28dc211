#!/usr/bin/env bash
# Times what a newcomer waits for: a fresh clone's `make run` (and, with
# --test, `make test`) with the compiler cache disabled, phase by phase, and
# lists the slowest compile steps and tests.
#
#   bench/newcomer_time.sh [--rev REV] [--test] [--keep] [--out DIR]
#
#   --rev REV   what to clone from this checkout (default HEAD)
#   --test      after `make run`, time `make test`'s parts too: the rest of
#               the build, the fuzzers' build and smoke runs, ctest
#   --keep      keep the clone (default: removed at the end)
#   --out DIR   where the logs go (default: a temporary directory, printed)
#
# Phases, each timed as wall seconds: apt (scripts/setup.sh, the profile the
# Makefile target takes), configure, build (make run's executables), study
# (make run's main job), and with --test: build-rest, fuzz (build and smoke
# runs), ctest. "Compile work" is the sum of build/.ninja_log's step times:
# what two cores would do in half that wall time, and the figure the build
# issue compares between revisions (it does not depend on -j).
set -euo pipefail

rev=HEAD
with_test=0
keep=0
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --rev) rev=${2:?--rev needs a revision}; shift 2 ;;
    --test) with_test=1; shift ;;
    --keep) keep=1; shift ;;
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "newcomer_time: unknown option '$1' (allowed: --rev REV, --test, --keep, --out DIR)" >&2; exit 2 ;;
  esac
done

src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
sha=$(git -C "$src" rev-parse --verify --quiet "$rev^{commit}") ||
  { echo "newcomer_time: '$rev' is no commit of $src" >&2; exit 2; }
work=$(mktemp -d /tmp/dlscale-newcomer.XXXXXX)
[ -n "$out" ] || out=$work/logs
mkdir -p "$out"
out=$(cd "$out" && pwd)
cleanup() { if [ "$keep" = 0 ]; then rm -rf "$work/clone"; fi; }
trap cleanup EXIT

git clone -q --no-local "$src" "$work/clone"
git -C "$work/clone" checkout -q "$sha"
cd "$work/clone"
export CCACHE_DISABLE=1

phases=()
failed=""
# phase NAME COMMAND...: runs it, its output to $out/NAME.log, and records
# its wall seconds; a failing phase stops the script naming its log, except
# ctest, whose times are still reported (and the script exits 1 at the end).
phase() {
  local name=$1 t0 t1
  shift
  echo "newcomer_time: $name: $*" >&2
  t0=$(date +%s.%N)
  if ! "$@" >"$out/$name.log" 2>&1; then
    echo "newcomer_time: phase '$name' failed; see $out/$name.log" >&2
    tail -n 20 "$out/$name.log" >&2
    [ "$name" = ctest ] || exit 1
    failed=$name
  fi
  t1=$(date +%s.%N)
  phases+=("$name $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')")
}

# Sum and list the steps of a .ninja_log (v5: start end mtime output hash,
# milliseconds); a step rebuilt later counts once, as its last build.
ninja_steps() {
  awk -F'\t' '!/^#/ { t[$4] = $2 - $1 } END { for (o in t) printf "%.1f\t%s\n", t[o] / 1000, o }' "$1"
}

profile_run=run
[ "$with_test" = 1 ] && profile_run=test
phase apt bash scripts/setup.sh "$profile_run"
phase configure cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
phase build cmake --build build -j "$(nproc)" --target dlscale_cli
cp build/.ninja_log "$out/ninja_run.log"
phase study make run
if [ "$with_test" = 1 ]; then
  phase build-rest cmake --build build -j "$(nproc)"
  phase fuzz make fuzz-smoke
  if grep -q '^ctest:' Makefile; then  # make test's own ctest command (its CPU slots)
    phase ctest make ctest
  else
    phase ctest bash -c "cd build && ctest -j $(nproc) --output-on-failure --no-tests=error"
  fi
  cp build/.ninja_log "$out/ninja_all.log"
fi

echo
echo "newcomer_time: $(git log -1 --format='%h %s' | cut -c1-72)"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
  "$(grep -c avx512f /proc/cpuinfo | awk '{print ($1 > 0) ? "AVX-512" : "AVX2 only"}'), $(date -u +%F)"
total=0
for p in "${phases[@]}"; do
  printf '  %-11s %8.1f s\n' "${p%% *}" "${p##* }"
  total=$(awk -v a="$total" -v b="${p##* }" 'BEGIN {printf "%.1f", a + b}')
done
printf '  %-11s %8.1f s\n' total "$total"
run_work=$(ninja_steps "$out/ninja_run.log" | awk '{s += $1} END {printf "%.0f", s}')
echo "compile work of make run: $run_work s in $(ninja_steps "$out/ninja_run.log" | wc -l) steps"
echo "slowest steps of make run's build:"
ninja_steps "$out/ninja_run.log" | sort -rn | head -10 | awk -F'\t' '{printf "  %7.1f s  %s\n", $1, $2}'
if [ "$with_test" = 1 ]; then
  all_work=$(ninja_steps "$out/ninja_all.log" | awk '{s += $1} END {printf "%.0f", s}')
  echo "compile work of everything (make test): $all_work s in $(ninja_steps "$out/ninja_all.log" | wc -l) steps"
  echo "slowest tests (ctest's own times):"
  grep -E '^ *[0-9]+/[0-9]+ Test +#' "$out/ctest.log" |
    sed -E 's/.*Test +#[0-9]+: ([^ ]+) .* ([0-9.]+) sec$/\2 \1/' | sort -rn | head -10 |
    awk '{printf "  %7.1f s  %s\n", $1, $2}'
  grep -E 'tests passed|tests failed|Total Test time|^\s+[0-9]+ - ' "$out/ctest.log" | sed 's/^/  /'
fi
echo "logs: $out"
[ -z "$failed" ] || { echo "newcomer_time: $failed failed" >&2; exit 1; }
