#!/usr/bin/env bash
# Does prefetching pay off in training? resnet18 on an image folder with
# --prefetch 0 and --prefetch 2, alternately (A B B A ...), ROUNDS rounds;
# prints each run's samples/s and data-phase ms, then the medians.
#
#   bash bench/prefetch_train.sh [FOLDER (default /tmp/dlscale-jpeg-folder)] [ROUNDS (default 5)]
#
# Make the folder with: /usr/bin/python3 bench/make_image_folder.py /tmp/dlscale-jpeg-folder
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${DLSCALE:-$here/../build/dlscale}"
folder="${1:-/tmp/dlscale-jpeg-folder}"
rounds="${2:-5}"
[ -d "$folder" ] || { echo "no folder $folder (bench/make_image_folder.py makes one)" >&2; exit 2; }
args=(train --model resnet18 --data "folder:$folder" --image-size 64 --batch 32 --steps 25 --warmup 5
      --threads 1 --data-threads 1 --display-every 0 --classes 10)
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then order="0 2"; else order="2 0"; fi
  for p in $order; do
    "$bin" "${args[@]}" --prefetch "$p" --json "$tmp/r.json" > /dev/null
    line="$(jq -r '"\(.results.samples_per_sec) \(.results.breakdown_ms.data)"' "$tmp/r.json")"
    echo "$p $line" >> "$tmp/all"
    echo "round $r prefetch $p: samples/s, data ms = $line"
  done
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
m0="$(awk '$1 == 0 {print $2}' "$tmp/all" | median)"
m2="$(awk '$1 == 2 {print $2}' "$tmp/all" | median)"
echo "median samples/s: prefetch 0 $m0, prefetch 2 $m2, ratio $(awk -v a="$m2" -v b="$m0" 'BEGIN {printf "%.3f", a / b}')"
