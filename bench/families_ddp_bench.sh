#!/bin/bash
# The families against PyTorch DDP (gloo; bench/peer_ddp.py, the same
# architectures from bench/peer_models.py, batch per worker, optimizer and
# threads): 2 local workers, 1 thread each, weak scaling, alternating, 3
# rounds; prints each side's items/s (tokens, samples) per round and the
# ratio of the medians, and the median of the rounds' own ratios.
#   t: transformer;
#   n: ncf; s: ncf with sparse embedding gradients on both sides
#      (--sparse-embeddings; DDP allreduces sparse tensors over gloo);
#   m: maskrcnn (128x213, 64 RoIs an image, 1 image a worker; with the
#      positive RoIs an image both mask heads ran on).
# FAMILIES="t" runs some of them only; ROUNDS=N sets the rounds. Run from
# the repository root after a build:
#   bash bench/families_ddp_bench.sh
#   FAMILIES=t ROUNDS=7 bash bench/families_ddp_bench.sh
set -e
cd "$(dirname "$0")/.."
families=${FAMILIES:-t n s m}
rounds=${ROUNDS:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "families_ddp_bench.sh: ROUNDS must be a positive count (got '$rounds')" >&2; exit 2; }
declare -A args=(
  [t]="--model transformer --vocab 8192 --seq-len 32 --batch 8 --steps 8 --warmup 2 --optimizer momentum --lr 0.001"
  [n]="--model ncf --batch 2048 --steps 10 --warmup 2 --optimizer momentum --lr 0.01"
  [s]="--model ncf --batch 2048 --steps 10 --warmup 2 --optimizer momentum --lr 0.01 --sparse-embeddings"
  # maskrcnn's weights held (lr 1e-30), as in families_bench.sh: both sides'
  # mask heads run on the untrained proposals' positives (printed).
  [m]="--model maskrcnn --image-size 128 --rois 64 --batch 1 --steps 6 --warmup 2 --optimizer momentum --lr 1e-30"
)
for m in $families; do
  [ -n "${args[$m]:-}" ] || { echo "families_ddp_bench.sh: unknown family '$m' in FAMILIES (allowed: t n s m)" >&2; exit 2; }
done
for r in $(seq 1 "$rounds"); do
  for m in $families; do
    level=info
    [ "$m" != m ] || level=debug  # maskrcnn names its positive RoIs at debug
    # shellcheck disable=SC2086
    DLSCALE_LOG_LEVEL=$level build/dlscale train ${args[$m]} --workers 2 --threads 1 --display-every 0 \
      --json /tmp/ddp_${m}_d$r.json >/dev/null 2>/tmp/ddp_${m}_d$r.err
    # shellcheck disable=SC2086
    /usr/bin/python3 bench/peer_ddp.py ${args[$m]} --workers 2 --threads 1 > /tmp/ddp_${m}_p$r.json
  done
done
FAMILIES="$families" ROUNDS="$rounds" /usr/bin/python3 - <<'P'
import json, os, statistics, sys
sys.path.insert(0, "bench")
from maskrcnn_positives import mean_positives
units = {"t": "tokens", "n": "samples", "s": "samples, sparse embeddings", "m": "images"}
rounds = range(1, int(os.environ["ROUNDS"]) + 1)
for m in os.environ["FAMILIES"].split():
    d = [json.load(open(f"/tmp/ddp_{m}_d{r}.json"))["results"]["items_per_sec"] for r in rounds]
    p = [json.loads(open(f"/tmp/ddp_{m}_p{r}.json").read())["items_per_sec"] for r in rounds]
    print(m, units[m], "dlscale", [round(x, 2) for x in d], "ddp", [round(x, 2) for x in p],
          "median ratio %.2f" % (statistics.median(d) / statistics.median(p)),
          "median of rounds' ratios %.2f" % statistics.median(a / b for a, b in zip(d, p)))
    if m == "m":
        # The RoIs both mask heads ran on (rank 0's for the peer); skip 2 warm-up steps x 1 image.
        print("m positive RoIs an image, measured steps: dlscale",
              [round(mean_positives(f"/tmp/ddp_m_d{r}.err", 2), 1) for r in rounds], "peer",
              [round(json.loads(open(f"/tmp/ddp_m_p{r}.json").read())["positive_rois_per_image"], 1)
               for r in rounds])
P
