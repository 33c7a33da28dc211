#!/bin/bash
# The families beyond image classification against PyTorch eager
# (bench/peer_train.py, same architecture from bench/peer_models.py, batch,
# optimizer and threads), 1 worker, 2 threads, alternating, 3 rounds; prints
# each side's items/s (tokens, samples, images) and the ratio of the medians.
# Run from the repository root after a build: bash bench/families_bench.sh
# (t: transformer, g: gnmt at hidden 512, n: ncf, s: ssd300 with both sides
# in channels-last). FAMILIES="s" runs some of them only.
set -e
cd "$(dirname "$0")/.."
families=${FAMILIES:-t g n s}
run() {  # run KEY ROUND DLSCALE_AND_PEER_FLAGS...
  local key=$1 r=$2; shift 2
  build/dlscale train "$@" --threads 2 --display-every 0 --json /tmp/${key}_d$r.json >/dev/null 2>&1
  /usr/bin/python3 bench/peer_train.py "$@" --threads 2 $([ "$key" = s ] && echo --channels-last) > /tmp/${key}_p$r.json
}
for r in 1 2 3; do
  for f in $families; do
    case $f in
      t) run t $r --model transformer --vocab 8192 --seq-len 32 --batch 8 --steps 8 --warmup 2 --optimizer momentum --lr 0.001 ;;
      g) run g $r --model gnmt --vocab 8192 --seq-len 32 --hidden 512 --batch 8 --steps 8 --warmup 2 --optimizer momentum --lr 0.01 ;;
      n) run n $r --model ncf --batch 4096 --steps 12 --warmup 2 --optimizer momentum --lr 0.01 ;;
      s) run s $r --model ssd300 --batch 4 --steps 6 --warmup 2 --optimizer momentum --lr 0.001 ;;
    esac
  done
done
FAMILIES="$families" python3 - <<'P'
import json, os, statistics
units = {"t": "tokens", "g": "tokens", "n": "samples", "s": "images"}
for m in os.environ["FAMILIES"].split():
    d = [json.load(open(f"/tmp/{m}_d{r}.json"))["results"]["items_per_sec"] for r in (1, 2, 3)]
    p = [json.loads(open(f"/tmp/{m}_p{r}.json").read())["items_per_sec"] for r in (1, 2, 3)]
    print(m, units[m], "dlscale", [round(x, 1) for x in d], "peer", [round(x, 1) for x in p],
          "median ratio %.2f" % (statistics.median(d) / statistics.median(p)))
P
