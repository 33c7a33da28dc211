#!/bin/bash
# dlscale predict against this machine (docs/predict.md, "Accuracy on this
# machine"): 1-worker calibration records of lenet and resnet18 (with
# --trace, as the sweep's settings) and the same with every core busy
# (independent workers, --calibrate-busy), 3 runs of each before the
# sweep and 3 after it, the median of the 6 kept (bench/calibrate.sh);
# commbench of the unshaped emulated link in float32, float16 and bfloat16
# (each wire type's own rate; also 3 runs before and 3 after, the median
# kept) and of each shaped hop the sweep uses (HOPS: what a link or uplink
# of that rate delivers), each 16-bit type's cast rate
# (bench/cast_rate.py, into a copy of
# examples/systems/local-cluster.yaml), the measured sweep
# examples/predict-check.yaml, then `report --type predict`: from the
# 1-worker calibrations alone ($SWEEP-1worker.txt; its summary line is
# printed) and with the busy ones ($SWEEP.txt). As root (the emulated
# cluster). Everything goes to $OUT (default /tmp/dlscale-SWEEP).
# SWEEP=fabric-check runs examples/fabric-check.yaml instead: 4 hosts in
# one switch or in racks with shared uplinks (docs/predict.md, "A shared
# fabric").
#
#   sudo bench/predict_check.sh                      # about 45 minutes on 2 cores
#   sudo SWEEP=fabric-check bench/predict_check.sh   # about 20 minutes
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dlscale=${DLSCALE:-$here/build/dlscale}
sweep=${SWEEP:-predict-check}
[ -f "$here/examples/$sweep.yaml" ] || { echo "SWEEP=$sweep: no examples/$sweep.yaml" >&2; exit 2; }
# The shaped hops to time apart: link:MBIT (2 hosts on links of MBIT) or
# uplink:MBIT (2 hosts in racks of 1 whose uplinks run at MBIT).
if [ "$sweep" = fabric-check ]; then hops=${HOPS:-"link:100 uplink:50"}; else hops=${HOPS:-"link:100 link:1000"}; fi
for hop in $hops; do
  case $hop in link:[0-9]*|uplink:[0-9]*) ;; *) echo "HOPS: '$hop' is not link:MBIT or uplink:MBIT" >&2; exit 2;; esac
done
out=${OUT:-/tmp/dlscale-$sweep}
mkdir -p "$out"
cd "$out"

# calibrate and commbench_median [--add] NAME FLAGS...: 3 (more) runs; the median kept
. "$here/bench/calibrate.sh"

# Each model on 1 worker, 1 thread, as the sweep runs it; then what a
# worker computes while every core computes: one independent worker a core,
# no exchange (report --calibrate-busy; the runs of as many workers as
# cores, or more, are predicted at these times). Called before the sweep
# and after it: the median of the 6 runs is kept, so the calibration spans
# the half hour whose runs it predicts (bench/README.md, "Calibrating by
# what predict reads").
cores=$(nproc)
calibrate_all() {  # [--add]
  calibrate "$@" lenet -m lenet --image-size 28 --batch 64 --steps 10 --warmup 2 --threads 1 --display-every 0
  calibrate "$@" resnet18 -m resnet18 --image-size 32 --batch 32 --steps 10 --warmup 2 --threads 1 --display-every 0
  calibrate "$@" lenet-busy -m lenet --image-size 28 --batch 64 --steps 10 --warmup 2 --threads 1 --display-every 0 \
    --workers "$cores" --strategy independent
  calibrate "$@" resnet18-busy -m resnet18 --image-size 32 --batch 32 --steps 10 --warmup 2 --threads 1 \
    --display-every 0 --workers "$cores" --strategy independent
}
echo "== calibration: 1 worker, then $cores independent workers (every core busy); 1 thread each; 3 runs" >&2
calibrate_all

# The unshaped link is the machine's CPU, whose speed moves as the
# calibration's does: 3 runs of each wire type, before the sweep and after
# it, the median of the 6 kept (bench/calibrate.sh).
commbench_unshaped() {  # [--add]
  "$dlscale" cluster up --name pcheck --hosts 2 > /dev/null
  local dtype ops
  for dtype in f32 f16 bf16; do
    # float32's ping-pong too: one message at a time, one way (a tree's), on
    # a link that is the CPU.
    ops=allreduce; [ $dtype = f32 ] && ops=allreduce,sendrecv
    commbench_median "$@" "commbench-$dtype" --cluster pcheck --op $ops -b 1K -e 64M --iters 5 --threads 1 \
      --dtype $dtype
  done
  "$dlscale" cluster down --name pcheck > /dev/null
}
trap '"$dlscale" cluster down --name pcheck > /dev/null 2>&1 || true' EXIT
echo "== commbench: allreduce across 2 unshaped emulated hosts, float32 (and its sendrecv), float16 and bfloat16;" \
  "3 runs each" >&2
commbench_unshaped

echo "== commbench: each shaped hop ($hops) between 2 emulated hosts" >&2
hop_records=()
for hop in $hops; do
  kind=${hop%%:*} mbit=${hop#*:}
  if [ "$kind" = link ]; then shape=(--link-mbit "$mbit"); else shape=(--rack-hosts 1 --uplink-mbit "$mbit"); fi
  "$dlscale" cluster up --name pcheck --hosts 2 "${shape[@]}" > /dev/null
  "$dlscale" commbench --cluster pcheck --op allreduce -b 1K -e 64M --iters 3 --threads 1 \
    --json "commbench-$kind$mbit.json" | grep "allreduce:" >&2
  "$dlscale" cluster down --name pcheck > /dev/null
  hop_records+=(--commbench "commbench-$kind$mbit.json")
done

echo "== cast rates: fp32 to each 16-bit wire type and back, as the strategies cast (bench/cast_rate.py)" >&2
# (Not tee /dev/stderr: reopening a log that stderr was redirected to with
# '>' truncates it.)
cast_out=$(/usr/bin/python3 "$here/bench/cast_rate.py")
echo "$cast_out" >&2
cast_line=$(echo "$cast_out" | tail -1)
case $cast_line in "cast_gbyte_s: {fp16: "*) ;; *) echo "cast_rate.py gave no rates: '$cast_line'" >&2; exit 1;; esac
# The shipped system with this machine's cast rates in place of its own.
grep -v '^cast_gbyte_s:' "$here/examples/systems/local-cluster.yaml" > system.yaml
echo "$cast_line" >> system.yaml

echo "== the measured sweep" >&2
# In rounds (--interleave): a slow spell of this shared machine, seconds
# long, falls on one repeat of several runs, not on all 3 of one.
"$dlscale" sweep "$here/examples/$sweep.yaml" --db results.db --interleave
echo "== calibration and the unshaped commbench again, after the sweep: 3 more runs of each; the median of all 6 kept" >&2
calibrate_all --add
commbench_unshaped --add

inputs=(--db results.db --sweep "$sweep" --type predict --calibrate lenet.json --calibrate resnet18.json
  --commbench commbench-f32.json --commbench commbench-f16.json --commbench commbench-bf16.json
  "${hop_records[@]}" --system system.yaml)
# From the 1-worker calibrations alone first (to the file only), then with
# the busy ones: what every core computing costs the predictions.
"$dlscale" report "${inputs[@]}" > "$sweep-1worker.txt"
echo "== predicted against measured (from the 1-worker calibrations alone: $sweep-1worker.txt)" >&2
grep "^note: median" "$sweep-1worker.txt" >&2
echo "== predicted against measured" >&2
"$dlscale" report "${inputs[@]}" --calibrate-busy lenet-busy.json --calibrate-busy resnet18-busy.json |
  tee "$sweep.txt"
