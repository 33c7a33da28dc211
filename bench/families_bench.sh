#!/bin/bash
# The families beyond image classification against PyTorch eager
# (bench/peer_train.py, same architecture from bench/peer_models.py, batch,
# optimizer and threads), 1 worker, 2 threads, alternating, 3 rounds; prints
# each side's items/s (tokens, samples) and the ratio of the medians.
# Run from the repository root after a build: bash bench/families_bench.sh
# (t: transformer, g: gnmt at hidden 512, n: ncf).
set -e
cd "$(dirname "$0")/.."
for r in 1 2 3; do
  build/dlscale train --model transformer --vocab 8192 --seq-len 32 --batch 8 --steps 8 --warmup 2 --threads 2 --optimizer momentum --lr 0.001 --display-every 0 --json /tmp/t_d$r.json >/dev/null 2>&1
  /usr/bin/python3 bench/peer_train.py --model transformer --vocab 8192 --seq-len 32 --batch 8 --steps 8 --warmup 2 --threads 2 --optimizer momentum --lr 0.001 > /tmp/t_p$r.json
  build/dlscale train --model gnmt --vocab 8192 --seq-len 32 --hidden 512 --batch 8 --steps 8 --warmup 2 --threads 2 --optimizer momentum --lr 0.01 --display-every 0 --json /tmp/g_d$r.json >/dev/null 2>&1
  /usr/bin/python3 bench/peer_train.py --model gnmt --vocab 8192 --seq-len 32 --hidden 512 --batch 8 --steps 8 --warmup 2 --threads 2 --optimizer momentum --lr 0.01 > /tmp/g_p$r.json
  build/dlscale train --model ncf --batch 4096 --steps 12 --warmup 2 --threads 2 --optimizer momentum --lr 0.01 --display-every 0 --json /tmp/n_d$r.json >/dev/null 2>&1
  /usr/bin/python3 bench/peer_train.py --model ncf --batch 4096 --steps 12 --warmup 2 --threads 2 --optimizer momentum --lr 0.01 > /tmp/n_p$r.json
done
python3 - <<'P'
import json,statistics
for m,k in [("t","tokens"),("g","tokens"),("n","samples")]:
    d=[json.load(open(f"/tmp/{m}_d{r}.json"))["results"]["items_per_sec"] for r in (1,2,3)]
    p=[json.loads(open(f"/tmp/{m}_p{r}.json").read())["items_per_sec"] for r in (1,2,3)]
    print(m, k, "dlscale", [round(x) for x in d], "peer", [round(x) for x in p], "median ratio %.2f" % (statistics.median(d)/statistics.median(p)))
P
