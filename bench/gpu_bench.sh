#!/usr/bin/env bash
# GPU throughput against PyTorch eager (docs/gpu.md, bench/README.md "GPU"):
# run on the GPU machine after scripts/gpu/build.sh. Alternates dlscale and
# bench/peer_train.py (same model, batch, precision, memory format and
# optimizer; cudnn.benchmark on in both) for --rounds rounds and prints the
# medians and their ratio.
#   bash bench/gpu_bench.sh [--model resnet50] [--batch 256] [--amp bf16]
#                           [--steps 40] [--warmup 10] [--rounds 3]
set -euo pipefail
cd "$(dirname "$0")/.."
DLSCALE=${DLSCALE:-build-gpu/dlscale}
PYTHON=${PYTHON:-python3}
model=resnet50 batch=256 amp=bf16 steps=40 warmup=10 rounds=3 size=224
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2 ;; --batch) batch=$2 ;; --amp) amp=$2 ;; --steps) steps=$2 ;;
    --warmup) warmup=$2 ;; --rounds) rounds=$2 ;; --image-size) size=$2 ;;
    *) echo "gpu_bench.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift 2
done
[ -x "$DLSCALE" ] || { echo "gpu_bench.sh: $DLSCALE not built (scripts/gpu/build.sh)" >&2; exit 2; }
out=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
  "$DLSCALE" train --model "$model" --image-size "$size" --device cuda --batch "$batch" \
    --steps "$steps" --warmup "$warmup" --amp "$amp" --memory-format channels-last \
    --optimizer momentum --display-every 0 --json "$out/dlscale$r.json" >/dev/null
  "$PYTHON" bench/peer_train.py --model "$model" --image-size "$size" --device cuda \
    --batch "$batch" --steps "$steps" --warmup "$warmup" --amp "$amp" --channels-last \
    --optimizer momentum >"$out/peer$r.json"
  echo "round $r done" >&2
done
"$PYTHON" - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
d = [json.load(open(f"{out}/dlscale{r}.json"))["results"]["samples_per_sec"] for r in range(1, rounds + 1)]
p = [json.loads(open(f"{out}/peer{r}.json").read())["samples_per_sec"] for r in range(1, rounds + 1)]
rec = json.load(open(f"{out}/dlscale1.json"))
peer = json.loads(open(f"{out}/peer1.json").read())
print(f"gpu: {rec['environment'].get('gpu')} | dlscale (LibTorch {rec['environment']['torch_version']}) vs PyTorch eager {peer['torch_version']}")
print("dlscale samples/s:", " ".join(f"{x:.0f}" for x in d))
print("peer    samples/s:", " ".join(f"{x:.0f}" for x in p))
md, mp = statistics.median(d), statistics.median(p)
print(f"median dlscale {md:.0f} | peer {mp:.0f} | ratio {md / mp:.3f}")
PY
