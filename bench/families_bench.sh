#!/bin/bash
# The families beyond image classification against PyTorch eager
# (bench/peer_train.py, same architecture from bench/peer_models.py, batch,
# optimizer and threads), 1 worker, alternating, 3 rounds; prints each side's
# items/s (tokens, samples, images) and the ratio of the medians.
# Run from the repository root after a build:
#   bash bench/families_bench.sh          # CPU: 2 threads, CPU-sized models
#   bash bench/families_bench.sh --gpu    # GPU machine: bf16, full-sized models,
#                                         # build-gpu/dlscale against python3's torch
# (t: transformer, g: gnmt, n: ncf, s: ssd300 with both sides in
# channels-last, m: maskrcnn at 128x213 with 64 RoIs an image, on the CPU
# only: its RoIAlign has no CUDA kernel; both sides also print the
# positive RoIs an image their mask heads ran on). FAMILIES="s" runs some
# of them only; ROUNDS=N sets rounds.
set -e
cd "$(dirname "$0")/.."
families=${FAMILIES:-t g n s}
rounds=${ROUNDS:-3}
gpu=0
case "${1:-}" in
  "") ;;
  --gpu) gpu=1 ;;
  *) echo "families_bench.sh: unknown option '$1' (allowed: --gpu)" >&2; exit 2 ;;
esac
if [ $gpu = 1 ]; then
  dlscale=${DLSCALE:-build-gpu/dlscale} python=${PYTHON:-python3}
  common=(--device cuda --amp bf16 --optimizer momentum)
else
  dlscale=${DLSCALE:-build/dlscale} python=${PYTHON:-/usr/bin/python3}
  common=(--threads 2 --optimizer momentum)
fi
[ -x "$dlscale" ] || { echo "families_bench.sh: $dlscale is not built" >&2; exit 2; }
out=$(mktemp -d)
run() {  # run KEY ROUND DLSCALE_AND_PEER_FLAGS...
  local key=$1 r=$2; shift 2
  # maskrcnn's debug lines name each image's positive RoIs (bench/maskrcnn_positives.py)
  DLSCALE_LOG_LEVEL=$([ "$key" = m ] && echo debug || echo info) \
    "$dlscale" train "$@" "${common[@]}" --display-every 0 --json "$out/${key}_d$r.json" >/dev/null 2>"$out/${key}_d$r.err" ||
    echo "families_bench.sh: dlscale $key round $r failed: $(tail -n 1 "$out/${key}_d$r.err")" >&2
  "$python" bench/peer_train.py "$@" "${common[@]}" $([ "$key" = s ] && echo --channels-last) \
    >"$out/${key}_p$r.json" 2>"$out/${key}_p$r.err" ||
    echo "families_bench.sh: peer $key round $r failed: $(tail -n 1 "$out/${key}_p$r.err")" >&2
}
args() {  # args KEY: the family's model flags on this device
  if [ $gpu = 1 ]; then
    case $1 in
      t) echo --model transformer --batch 64 --steps 20 --warmup 5 --lr 0.001 ;;
      g) echo --model gnmt --batch 64 --steps 20 --warmup 5 --lr 0.01 ;;
      n) echo --model ncf --batch 65536 --steps 20 --warmup 5 --lr 0.01 ;;
      s) echo --model ssd300 --batch 32 --steps 12 --warmup 4 --lr 0.001 ;;
    esac
  else
    case $1 in
      t) echo --model transformer --vocab 8192 --seq-len 32 --batch 8 --steps 8 --warmup 2 --lr 0.001 ;;
      g) echo --model gnmt --vocab 8192 --seq-len 32 --hidden 512 --batch 8 --steps 8 --warmup 2 --lr 0.01 ;;
      n) echo --model ncf --batch 4096 --steps 12 --warmup 2 --lr 0.01 ;;
      s) echo --model ssd300 --batch 4 --steps 6 --warmup 2 --lr 0.001 ;;
      # maskrcnn's weights held (lr 1e-30, every pass still runs): its step
      # grows with the positive RoIs as its RPN learns, so both sides keep
      # the untrained proposals' positives (printed) to do the same work.
      m) echo --model maskrcnn --image-size 128 --rois 64 --batch 2 --steps 6 --warmup 2 --lr 1e-30 ;;
    esac
  fi
}
for r in $(seq 1 "$rounds"); do
  for f in $families; do
    case $f in t|g|n|s) ;; m) [ $gpu = 0 ] || { echo "families_bench.sh: maskrcnn runs on the CPU only" >&2; exit 2; } ;;
      *) echo "families_bench.sh: unknown family '$f' (t g n s m)" >&2; exit 2 ;; esac
    # shellcheck disable=SC2046
    run "$f" "$r" $(args "$f")
  done
  echo "round $r done" >&2
done
FAMILIES="$families" ROUNDS="$rounds" OUT="$out" "$python" - <<'P'
import json, os, statistics, sys
sys.path.insert(0, "bench")
from maskrcnn_positives import mean_positives
units = {"t": "tokens", "g": "tokens", "n": "samples", "s": "images", "m": "images"}
out, rounds = os.environ["OUT"], int(os.environ["ROUNDS"])
def rates(m, side):
    got = []
    for r in range(1, rounds + 1):
        try:
            rec = json.loads(open(f"{out}/{m}_{side}{r}.json").read())
        except (OSError, ValueError):
            continue
        got.append(rec["results"]["items_per_sec"] if side == "d" else rec["items_per_sec"])
    return got
for m in os.environ["FAMILIES"].split():
    d, p = rates(m, "d"), rates(m, "p")
    ratio = "%.2f" % (statistics.median(d) / statistics.median(p)) if d and p else "n/a"
    print(m, units[m], "dlscale", [round(x, 2) for x in d], "peer", [round(x, 2) for x in p],
          "median ratio", ratio)
    if m == "m":  # the RoIs both mask heads ran on; skip 2 warm-up steps x 2 images
        dp = [mean_positives(f"{out}/m_d{r}.err", 2 * 2) for r in range(1, rounds + 1)]
        pp = [json.loads(open(f"{out}/m_p{r}.json").read())["positive_rois_per_image"]
              for r in range(1, rounds + 1)]
        print("m positive RoIs an image, measured steps: dlscale", [round(x, 1) for x in dp if x is not None],
              "peer", [round(x, 1) for x in pp if x is not None])
P
