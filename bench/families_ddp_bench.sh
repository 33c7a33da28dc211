#!/bin/bash
# The families against PyTorch DDP (gloo; bench/peer_ddp.py, the same
# architectures from bench/peer_models.py, batch per worker, optimizer and
# threads): 2 local workers, 1 thread each, weak scaling, alternating, 3
# rounds; prints each side's items/s (tokens, samples) and the ratio of the
# medians; ncf also with sparse embedding gradients on both sides
# (--sparse-embeddings; DDP allreduces sparse tensors over gloo), and
# maskrcnn (128x213, 64 RoIs an image, 1 image a worker; with the positive
# RoIs an image both mask heads ran on). Run from the
# repository root after a build:
#   bash bench/families_ddp_bench.sh
set -e
cd "$(dirname "$0")/.."
T="--model transformer --vocab 8192 --seq-len 32 --batch 8 --steps 8 --warmup 2 --optimizer momentum --lr 0.001"
N="--model ncf --batch 2048 --steps 10 --warmup 2 --optimizer momentum --lr 0.01"
# maskrcnn's weights held (lr 1e-30), as in families_bench.sh: both sides'
# mask heads run on the untrained proposals' positives (printed).
M="--model maskrcnn --image-size 128 --rois 64 --batch 1 --steps 6 --warmup 2 --optimizer momentum --lr 1e-30"
for r in 1 2 3; do
  build/dlscale train $T --workers 2 --threads 1 --display-every 0 --json /tmp/ddp_t_d$r.json >/dev/null 2>&1
  /usr/bin/python3 bench/peer_ddp.py $T --workers 2 --threads 1 > /tmp/ddp_t_p$r.json
  build/dlscale train $N --workers 2 --threads 1 --display-every 0 --json /tmp/ddp_n_d$r.json >/dev/null 2>&1
  /usr/bin/python3 bench/peer_ddp.py $N --workers 2 --threads 1 > /tmp/ddp_n_p$r.json
  build/dlscale train $N --sparse-embeddings --workers 2 --threads 1 --display-every 0 --json /tmp/ddp_s_d$r.json >/dev/null 2>&1
  /usr/bin/python3 bench/peer_ddp.py $N --sparse-embeddings --workers 2 --threads 1 > /tmp/ddp_s_p$r.json
  DLSCALE_LOG_LEVEL=debug build/dlscale train $M --workers 2 --threads 1 --display-every 0 --json /tmp/ddp_m_d$r.json \
    >/dev/null 2>/tmp/ddp_m_d$r.err
  /usr/bin/python3 bench/peer_ddp.py $M --workers 2 --threads 1 > /tmp/ddp_m_p$r.json
done
python3 - <<'P'
import json, statistics, sys
sys.path.insert(0, "bench")
from maskrcnn_positives import mean_positives
for m, k in [("t", "tokens"), ("n", "samples"), ("s", "samples, sparse embeddings"), ("m", "images")]:
    d = [json.load(open(f"/tmp/ddp_{m}_d{r}.json"))["results"]["items_per_sec"] for r in (1, 2, 3)]
    p = [json.loads(open(f"/tmp/ddp_{m}_p{r}.json").read())["items_per_sec"] for r in (1, 2, 3)]
    print(m, k, "dlscale", [round(x, 2) for x in d], "ddp", [round(x, 2) for x in p],
          "median ratio %.2f" % (statistics.median(d) / statistics.median(p)))
# The RoIs both mask heads ran on (rank 0's for the peer); skip 2 warm-up steps x 1 image.
print("m positive RoIs an image, measured steps: dlscale",
      [round(mean_positives(f"/tmp/ddp_m_d{r}.err", 2), 1) for r in (1, 2, 3)], "peer",
      [round(json.loads(open(f"/tmp/ddp_m_p{r}.json").read())["positive_rois_per_image"], 1) for r in (1, 2, 3)])
P
