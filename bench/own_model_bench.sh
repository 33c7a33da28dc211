#!/bin/bash
# Your own model against PyTorch running the same TorchScript module
# (docs/models.md, "Your own model"): torchvision's resnet18 (10 classes),
# scripted by examples/own-model/export.py, at 32x32, batch 32 per worker,
# momentum SGD, 1 thread per worker. Per round, alternating: dlscale on 1
# worker and PyTorch eager (bench/peer_train.py) on the module; dlscale on
# 2 workers and PyTorch DDP (bench/peer_ddp.py, gloo) on it; and dlscale's
# zoo resnet18 on 1 worker (what the TorchScript path costs against the
# zoo's C++ module). The peers run twice: with PyTorch's defaults, and like
# for like, given dlscale's two defaults that differ from PyTorch's
# (channels-last tensors, and glibc malloc keeping freed memory, as
# bench/run_peer_bench.py --peer-malloc-tuning). Prints each side's images/s per round and the ratios
# of the medians. Run from the repository root after a build:
#   bash bench/own_model_bench.sh [ROUNDS]      (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 examples/own-model/export.py "$dir" resnet18-10 >/dev/null
pt=$dir/resnet18-10.pt
tuned=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824:glibc.malloc.top_pad=67108864
C="--image-size 32 --batch 32 --steps 14 --warmup 4 --optimizer momentum --lr 0.01 --threads 1"
for r in $(seq 1 "$rounds"); do
  build/dlscale train --model "$pt" $C --display-every 0 --json "$dir/d1_$r.json" >/dev/null 2>&1
  /usr/bin/python3 bench/peer_train.py --model "$pt" $C --classes 10 > "$dir/p1_$r.json"
  build/dlscale train --model "$pt" $C --workers 2 --display-every 0 --json "$dir/d2_$r.json" >/dev/null 2>&1
  /usr/bin/python3 bench/peer_ddp.py --model "$pt" $C --classes 10 --workers 2 > "$dir/p2_$r.json"
  build/dlscale train --model resnet18 --classes 10 $C --display-every 0 --json "$dir/z1_$r.json" >/dev/null 2>&1
  GLIBC_TUNABLES=$tuned /usr/bin/python3 bench/peer_train.py --model "$pt" $C --classes 10 --channels-last \
    > "$dir/q1_$r.json"
  GLIBC_TUNABLES=$tuned /usr/bin/python3 bench/peer_ddp.py --model "$pt" $C --classes 10 --workers 2 \
    --channels-last > "$dir/q2_$r.json"
  echo "round $r of $rounds done" >&2
done
/usr/bin/python3 - "$dir" "$rounds" <<'P'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def ours(k): return [json.load(open(f"{d}/{k}_{r}.json"))["results"]["items_per_sec"] for r in range(1, rounds + 1)]
def peer(k): return [json.loads(open(f"{d}/{k}_{r}.json").read())["items_per_sec"] for r in range(1, rounds + 1)]
rows = [("1 worker: dlscale / PyTorch eager, same module", ours("d1"), peer("p1")),
        ("2 workers: dlscale / PyTorch DDP, same module", ours("d2"), peer("p2")),
        ("1 worker: dlscale / PyTorch eager like for like, same module", ours("d1"), peer("q1")),
        ("2 workers: dlscale / PyTorch DDP like for like, same module", ours("d2"), peer("q2")),
        ("1 worker: dlscale module / dlscale zoo resnet18", ours("d1"), ours("z1"))]
for name, a, b in rows:
    print(f"{name}: {[round(x, 1) for x in a]} vs {[round(x, 1) for x in b]} images/s, "
          f"median ratio {statistics.median(a) / statistics.median(b):.2f}")
P
