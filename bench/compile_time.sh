#!/usr/bin/env bash
# Times the compiles of some targets' objects in a configured build tree,
# without building them: each compile command that `ninja -t commands`
# lists for TARGET's objects runs with the compiler cache off, JOBS at a
# time, its object written to a scratch directory (the tree is untouched).
# Prints each object's seconds, the compile work (their sum) by target, and
# the wall time. Compare two configurations (e.g. one with
# -DDLSCALE_UNITY=OFF) in the same hour: this machine's speed drifts.
#
#   bench/compile_time.sh [--jobs N] BUILD_DIR TARGET...
#
#   --jobs N   compiles at once (default: the cores)
#   TARGET     a ninja target whose objects to time, e.g. tests/dlscale_tests
set -euo pipefail

jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "compile_time: unknown option '$1' (allowed: --jobs N)" >&2; exit 2 ;;
    *) break ;;
  esac
done
case $jobs in '' | *[!0-9]* | 0*) echo "compile_time: --jobs '$jobs' is not a positive number" >&2; exit 2 ;; esac
[ $# -ge 2 ] || { echo "compile_time: usage: compile_time.sh [--jobs N] BUILD_DIR TARGET..." >&2; exit 2; }
build=$1
shift
[ -f "$build/build.ninja" ] || { echo "compile_time: '$build' holds no configured Ninja build" >&2; exit 2; }

for target in "$@"; do
  (cd "$build" && ninja -t query "$target") >/dev/null 2>&1 ||
    { echo "compile_time: '$build' has no target '$target'" >&2; exit 2; }
done

scratch=$(mktemp -d /tmp/dlscale-compile-time.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
# One line a compile: OBJECT<TAB>COMMAND, the command's object redirected
# into the scratch directory (named after the object), its dependency file
# and ccache dropped.
for target in "$@"; do
  dir="/$(basename "$target").dir/"
  (cd "$build" && ninja -t commands "$target") | { grep -F -- "$dir" || true; } |
    while IFS= read -r cmd; do
      [[ $cmd =~ \ -o\ ([^ ]+\.o)\ -c\  ]] || continue
      obj=${BASH_REMATCH[1]}
      case /$obj in *"$dir"*) ;; *) continue ;; esac
      out=$scratch/$(tr / _ <<<"$obj")
      cmd=$(sed -E "s# -o [^ ]+\.o -c # -o $out -c #; s# -MD -MT [^ ]+ -MF [^ ]+##; s#[^ ]*/ccache ##" <<<"$cmd")
      printf '%s\t%s\n' "$obj" "$cmd"
    done
done | sort -u >"$scratch/jobs"
count=$(wc -l <"$scratch/jobs")
[ "$count" -gt 0 ] || { echo "compile_time: no compile of an object of $* in '$build'" >&2; exit 2; }
echo "compile_time: $count compiles, $jobs at a time, ccache off" >&2

export CCACHE_DISABLE=1 build
start=$EPOCHREALTIME
# Each compile prints "SECONDS OBJECT", or fails the run naming its object.
tr '\n' '\0' <"$scratch/jobs" | xargs -0 -P "$jobs" -I{} bash -c '
  obj=${1%%$'"'\t'"'*}; cmd=${1#*$'"'\t'"'}
  t0=$EPOCHREALTIME
  (cd "$build" && bash -c "$cmd") >&2 || { echo "compile_time: compiling $obj failed" >&2; exit 255; }
  awk -v a="$t0" -v b="$EPOCHREALTIME" -v o="$obj" "BEGIN { printf \"%.3f %s\n\", b - a, o }"' _ {} >"$scratch/times"
wall=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }')

sort -rn "$scratch/times" | awk '{ printf "%8.1f s  %s\n", $1, $2 }'
for target in "$@"; do
  awk -v dir="/$(basename "$target").dir/" -v t="$target" \
    'index("/" $2, dir) { s += $1; n++ } END { printf "%s: compile work %.1f s in %d compiles\n", t, s, n }' \
    "$scratch/times"
done
awk -v w="$wall" '{ s += $1 } END { printf "all: compile work %.1f s in %d compiles, wall %.1f s\n", s, NR, w }' \
  "$scratch/times"
