#!/bin/bash
# Each ctest test alone, in a control group of its own: its wall time, the
# CPU time of every process it started (workers, hosts, daemons included)
# and their ratio, the cores it kept busy. A test whose ratio is well under
# 1 mostly waits (a timeout, a daemon, a shaped link) and takes no CPU slot
# of `make test` (tests/CMakeLists.txt, "CPU slots"). As root, nothing else
# running; a test that needs root is skipped otherwise.
#   bash bench/test_cpu.sh [--build DIR] [REGEX]     (REGEX: ctest -R, all by default)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
regex=.
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "test_cpu.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) regex=$1; shift ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "test_cpu.sh: needs root (a control group a test)" >&2; exit 2; }
[ -f "$build/CTestTestfile.cmake" ] || { echo "test_cpu.sh: $build is not a build directory" >&2; exit 2; }
build=$(cd "$build" && pwd)
if [ -d /sys/fs/cgroup/cpuacct ]; then
  group=/sys/fs/cgroup/cpuacct/dlscale-test-cpu
  cpu_ns() { cat "$group/cpuacct.usage"; }
else
  group=/sys/fs/cgroup/dlscale-test-cpu
  cpu_ns() { awk '$1 == "usage_usec" {print $2 * 1000}' "$group/cpu.stat"; }
fi
names=$(cd "$build" && ctest -N -R "$regex" | sed -n 's/^ *Test *#[0-9]*: //p')
[ -n "$names" ] || { echo "test_cpu.sh: no test matches $regex" >&2; exit 2; }
printf '%-80s %8s %8s %6s\n' test wall_s cpu_s cores
while read -r name; do
  mkdir -p "$group"
  exact=$(printf '%s' "$name" | sed 's/[][().*+?^$\\|{}]/\\&/g')
  start=$(date +%s.%N)
  rc=0
  (cd "$build" && bash -c 'echo $$ > "$1/cgroup.procs"; exec ctest -R "^$2\$" --output-on-failure' _ \
    "$group" "$exact" </dev/null >/dev/null 2>&1) || rc=$?
  end=$(date +%s.%N)
  awk -v n="$name" -v w="$(echo "$end - $start" | bc)" -v c="$(cpu_ns)" -v rc=$rc \
    'BEGIN {printf "%-80s %8.1f %8.1f %6.2f%s\n", n, w, c / 1e9, c / 1e9 / w, rc ? "  FAILED" : ""}'
  for i in 1 2 3 4 5; do rmdir "$group" 2>/dev/null && break; sleep 1; done
done <<<"$names"
