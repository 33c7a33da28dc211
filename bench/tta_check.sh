#!/bin/bash
# Time to target against workers, measured beside predicted (docs/predict.md,
# "Time to accuracy"): a traced 1-worker calibration of tinycnn on
# Fashion-MNIST at 64 samples a worker (the median of 3), a commbench of
# allreduce among 2 local workers (their loopback), the sweep
# examples/tta-workers.yaml (1, 2 and 4 local workers to 90% top-1, 3 seeds
# each), then `report --type tta` and `report --type predict --tta` from B0,
# the 2-worker run with the median steps to target, once from the 1-worker
# calibration alone and once with a busy one (one independent worker a
# core, the median of 3: report --calibrate-busy), which computes the runs
# of as many workers as cores, or more, at the speed a worker has beside
# the others. Everything goes to $OUT
# (default /tmp/dlscale-tta-workers); B0_WORKERS=4 takes B0 from the
# 4-worker runs instead.
#
#   bench/tta_check.sh            # about 12 minutes on 2 cores
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dlscale=${DLSCALE:-$here/build/dlscale}
b0_workers=${B0_WORKERS:-2}
case $b0_workers in 2|4) ;; *) echo "B0_WORKERS=$b0_workers: 2 or 4 (1 worker measures no noise scale)" >&2; exit 2;; esac
out=${OUT:-/tmp/dlscale-tta-workers}
mkdir -p "$out"
cd "$out"
. "$here/bench/calibrate.sh"  # calibrate NAME FLAGS...: the median of 3 one-worker runs

calibrate tinycnn -m tinycnn --data fashion-mnist --augment none --batch 64 --steps 300 --warmup 20 \
  --threads 1 --display-every 0
cores=$(nproc)
echo "== calibration with every core busy: $cores independent workers, 1 thread each; the median of 3" >&2
calibrate tinycnn-busy -m tinycnn --data fashion-mnist --augment none --batch 64 --steps 300 --warmup 20 \
  --threads 1 --display-every 0 --workers "$cores" --strategy independent
echo "== commbench: allreduce among 2 local workers, float32" >&2
"$dlscale" commbench -n 2 --op allreduce -b 1K -e 16M --iters 5 --threads 1 --json commbench.json |
  grep "allreduce:" >&2
echo "== sweep examples/tta-workers.yaml" >&2
"$dlscale" sweep "$here/examples/tta-workers.yaml" --db results.db --progress plain >&2
"$dlscale" report --db results.db --sweep tta-workers --type tta | tee tta.txt

# B0: of the runs of B0_WORKERS that reached the target, the median by steps.
"$dlscale" results export --db results.db --sweep tta-workers --format json > runs.json
b0=$(python3 - "$b0_workers" runs.json <<'PY'
import json, sys
workers, path = int(sys.argv[1]), sys.argv[2]
reached = []
for run in json.load(open(path))["runs"]:
    if run["params"].get("workers") != workers:
        continue
    for r in run["repeats"]:
        m = r.get("metrics", {})
        if r["status"] == "completed" and m.get("conv_success") == 1:
            reached.append((m["conv_steps_done"], run["id"]))
            break
if not reached:
    sys.exit(f"no run of {workers} workers reached the target")
reached.sort()
print(reached[(len(reached) - 1) // 2][1])
PY
)
echo "== B0: run $b0 ($b0_workers workers, the median steps to target)" >&2
"$dlscale" report --db results.db --sweep tta-workers --type predict --tta "$b0" --calibrate tinycnn.json \
  --commbench commbench.json | tee predict-tta.txt
echo "== the same with every core busy (--calibrate-busy)" >&2
"$dlscale" report --db results.db --sweep tta-workers --type predict --tta "$b0" --calibrate tinycnn.json \
  --calibrate-busy tinycnn-busy.json --commbench commbench.json | tee predict-tta-busy.txt
