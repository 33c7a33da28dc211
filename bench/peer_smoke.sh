#!/bin/bash
# Runs every peer script of bench/ for a few steps on tiny inputs and checks
# that each prints its figure: the peers carry bench/README.md's claims, and
# nothing else runs them, so an interface change breaks them unnoticed
# (peer_ddp.py did). No timing is asserted. ctest runs this as
# PeerScripts.RunAndPrintTheirFigures (label "peers").
#   bash bench/peer_smoke.sh [DLSCALE_BINARY]
set -u
cd "$(dirname "$0")/.."
dlscale=${1:-build/dlscale}
py=/usr/bin/python3  # Debian's interpreter: it sees python3-torch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
passed=0

# check NAME PATTERN COMMAND...: runs the command; within 5 minutes it must
# exit 0 and print a line matching PATTERN (an extended regex).
check() {
  local name=$1 pattern=$2
  shift 2
  local out="$tmp/$name.out" start=$SECONDS
  if timeout -k 10 300 "$@" >"$out" 2>&1 && grep -Eq "$pattern" "$out"; then
    echo "PASS $name ($((SECONDS - start)) s)"
    passed=$((passed + 1))
  else
    echo "FAIL $name: $*"
    tail -n 5 "$out" | sed 's/^/    /'
    failed=$((failed + 1))
  fi
}

number='[0-9]+(\.[0-9]+)?'
check peer_train_lenet "\"samples_per_sec\": $number" \
  $py bench/peer_train.py --model lenet --batch 4 --steps 3 --warmup 1 --threads 1
check peer_train_transformer "\"items_per_sec\": $number" \
  $py bench/peer_train.py --model transformer --vocab 64 --seq-len 8 --batch 2 --steps 2 --warmup 1 --threads 1
check peer_train_ncf "\"samples_per_sec\": $number" \
  $py bench/peer_train.py --model ncf --batch 64 --steps 2 --warmup 1 --threads 1
# maskrcnn: images with objects drawn in, and the positive RoIs it counts
check peer_train_maskrcnn "\"positive_rois_per_image\": [1-9]" \
  $py bench/peer_train.py --model maskrcnn --image-size 64 --rois 16 --classes 5 --batch 1 --steps 2 \
  --warmup 1 --threads 1 --lr 1e-30 --optimizer momentum
check peer_ddp "\"samples_per_sec\": $number" \
  $py bench/peer_ddp.py --model lenet --batch 4 --workers 2 --steps 3 --warmup 1
check peer_ddp_zero "\"optimizer_state_bytes_max\": [1-9]" \
  $py bench/peer_ddp.py --model lenet --batch 4 --workers 2 --steps 3 --warmup 1 --zero --optimizer adam
check peer_allreduce_torch "\"busbw_gbps\": $number" \
  $py bench/peer_allreduce_torch.py --workers 2 --sizes 4096 --warmup 1 --iters 2
check commbench_peers "^ +4096 +$number" \
  $py bench/commbench_peers.py --dlscale "$dlscale" --workers 2 --sizes 4096 --warmup 1 --iters 2 --repeats 1
check data_loader_fashion_mnist "^samples/s: $number" \
  $py bench/data_loader_peer.py --data fashion-mnist --batch 32 --workers 0 --steps 3 --warmup 1
check make_image_folder "^wrote 16 " $py bench/make_image_folder.py "$tmp/jpeg" --images 16 --size 48
check data_loader_folder "^samples/s: $number" \
  $py bench/data_loader_peer.py --data "folder:$tmp/jpeg" --batch 4 --workers 0 --steps 2 --warmup 1 --image-size 32
check torchvision_reference "\"parameters\": [1-9]" \
  $py bench/torchvision_reference.py --image-size 32 --models lenet,resnet18,ncf
check run_peer_bench "^lenet +8 +28 .* $number$" \
  $py bench/run_peer_bench.py --dlscale "$dlscale" --case lenet:8:28 --runs 3 --threads 1 --steps 3 --warmup 1
check scaling "^lenet +8 weak .*%$" \
  $py bench/scaling.py --dlscale "$dlscale" --case lenet:8:28 --workers 2 --threads 1 --runs 1 --steps 3 --warmup 1
check tta_peer "^time to accuracy: $number s" \
  $py bench/tta_peer.py --epochs 1 --target 0.5 --threads 2 --batch 64 --train-samples 4096 \
  --test-samples 1024

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
