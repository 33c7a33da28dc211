#!/bin/bash
# Start-up of the commands that do not train (issue 28): `dlscale` (no
# LibTorch) against `dlscale-torch` (the same commands with LibTorch loaded,
# as every command was before the split), alternating, RUNS times each
# (default 10), on a results store of 100 train runs that it makes first
# (about 2 minutes; kept in STORE, default /tmp/dlscale-startup.db, and
# reused). Prints each command's median wall time on both and the ratio.
# Run from the repository root after a build: bash bench/startup_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10}
STORE=${STORE:-/tmp/dlscale-startup.db}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -s "$STORE" ]; then
  cat > "$work/startup.yaml" <<'Y'
name: startup
parameters: {model: lenet, steps: 3, warmup: 1, threads: 1, display-every: 0, repeats: 1, timeout: 120}
variables:
  batch: [8, 16, 32, 64, 128]
  seed: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]
Y
  echo "making a store of 100 runs in $STORE ..."
  build/dlscale sweep "$work/startup.yaml" --db "$STORE" --output-dir "$work/runs" --progress plain >/dev/null
fi

# ms BINARY ARGS...: the wall time of one call, in milliseconds.
ms() {
  local t0 t1
  t0=$(date +%s%N)
  "$@" >/dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf '%-44s %12s %16s %7s\n' command "dlscale ms" "dlscale-torch ms" ratio
for cmd in "--version" "results list --db $STORE" "report --db $STORE --sweep startup --type weak" \
  "sweep --dry-run examples/quickstart.yaml" "train --help"; do
  : > "$work/front"
  : > "$work/torch"
  for _ in $(seq "$RUNS"); do
    # shellcheck disable=SC2086
    ms build/dlscale $cmd >> "$work/front"
    # shellcheck disable=SC2086
    ms build/dlscale-torch $cmd >> "$work/torch"
  done
  f=$(median < "$work/front")
  t=$(median < "$work/torch")
  printf '%-44s %12s %16s %7s\n' "${cmd/$STORE/STORE}" "$f" "$t" "$(awk -v f="$f" -v t="$t" 'BEGIN {printf "%.0fx", t / (f > 0 ? f : 1)}')"
done
echo "median of $RUNS alternated calls each; store: $(build/dlscale results list --db "$STORE" | tail -n 1)"
