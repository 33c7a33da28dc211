#!/bin/bash
# OpenMP's wait settings against each other (bench/README.md, "OpenMP's
# wait policy"): each model trained by dlscale at 2 threads with each
# setting in its environment, the settings in turn, ROUNDS rounds (3);
# prints items/s per run and each setting's median. libgomp's default
# (300,000 spins when OMP_WAIT_POLICY is unset) is given explicitly, as
# the front sets its own when neither variable is set.
# Run from the repository root after a build:
#   bash bench/openmp_wait_bench.sh
set -e
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
declare -A args=(
  [resnet18]="--model resnet18 --image-size 32 --batch 32 --steps 12 --warmup 3"
  [lenet]="--model lenet --batch 64 --steps 40 --warmup 5"
  [transformer]="--model transformer --vocab 8192 --seq-len 32 --batch 8 --steps 8 --warmup 2 --lr 0.001"
  [ssd300]="--model ssd300 --batch 4 --steps 5 --warmup 2 --lr 0.001")
settings=("GOMP_SPINCOUNT=300000" "OMP_WAIT_POLICY=passive" "GOMP_SPINCOUNT=1000" "GOMP_SPINCOUNT=10000")
for r in $(seq 1 "$rounds"); do
  for m in resnet18 lenet transformer ssd300; do
    for e in "${settings[@]}"; do
      # shellcheck disable=SC2086
      env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT $e build/dlscale train ${args[$m]} --threads 2 --optimizer momentum \
        --display-every 0 --json "$out/run.json" >/dev/null 2>"$out/run.err" ||
        { echo "openmp_wait_bench.sh: $m with '$e' failed: $(tail -n 1 "$out/run.err")" >&2; continue; }
      echo "$m|$e|$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results']['items_per_sec'])" "$out/run.json")"
    done
  done
done | tee "$out/all.txt"
python3 - "$out/all.txt" <<'P'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    model, setting, rate = line.strip().split("|")
    runs[(model, setting)].append(float(rate))
for (model, setting), rates in runs.items():
    print(f"{model:12} {setting:35} median {statistics.median(rates):9.2f}  range {min(rates):.2f}-{max(rates):.2f}")
P
