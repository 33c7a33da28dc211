#!/bin/bash
# Sharded optimizer state against PyTorch's ZeroRedundancyOptimizer over DDP
# (bench/peer_ddp.py --zero, Debian's PyTorch, Gloo): the same model, Adam,
# batch per worker, steps and one thread per worker, 2 local workers,
# alternating, ROUNDS rounds (default 3). Prints each side's samples/s and
# the most optimizer-state bytes any rank keeps, and the ratio of the medians.
# Run from the repository root after a build: bash bench/zero_bench.sh
set -e
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
MODEL=${MODEL:-resnet18}
ARGS="--model $MODEL --image-size 32 --batch 32 --steps 12 --warmup 3 --threads 1 --optimizer adam --lr 0.001"
out=$(mktemp -d)
for r in $(seq "$ROUNDS"); do
  for stage in 1 2; do
    build/dlscale train $ARGS --workers 2 --strategy zero --zero-stage $stage --display-every 0 \
      --json "$out/d${stage}_$r.json" >/dev/null
  done
  /usr/bin/python3 bench/peer_ddp.py $ARGS --workers 2 --zero > "$out/p$r.json"
done
python3 - "$out" "$ROUNDS" <<'P'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
peer = [json.loads(open(f"{out}/p{r}.json").read()) for r in range(1, rounds + 1)]
p = [x["samples_per_sec"] for x in peer]
print("peer ZeroRedundancyOptimizer+DDP samples/s", [round(x, 1) for x in p],
      "optimizer state bytes (max over ranks)", peer[0]["optimizer_state_bytes_max"])
for stage in (1, 2):
    recs = [json.load(open(f"{out}/d{stage}_{r}.json")) for r in range(1, rounds + 1)]
    d = [x["results"]["samples_per_sec"] for x in recs]
    mem = recs[0]["results"]["mem"]
    print(f"dlscale zero stage {stage} samples/s", [round(x, 1) for x in d],
          "optimizer state bytes (max over ranks)", mem["optimizer_bytes"],
          "grads bytes", mem["grads_bytes"],
          "median ratio %.2f" % (statistics.median(d) / statistics.median(p)))
P
rm -rf "$out"
