#!/bin/bash
# Time to 90% Fashion-MNIST test accuracy: dlscale against bench/tta_peer.py
# (PyTorch eager, the same tinycnn model, recipe, batch and threads),
# alternating runs, medians. Wall time is the whole command (start-up, data
# loading, training, evaluations); "tta" is each tool's own run_start ->
# run_stop. Usage: bash bench/tta_bench.sh [--rounds N] (default 3).
set -euo pipefail
ROUNDS=3
[[ "${1:-}" == "--rounds" ]] && ROUNDS="$2"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/build/dlscale"
[[ -x "$BIN" ]] || { echo "build first: make build" >&2; exit 2; }
# The recipe both run (examples/fmnist-speedrun.yaml's).
BATCH=256 LR=0.2 EPOCHS=2 SMOOTH=0.1 WD=5e-4 TARGET=0.9
DLSCALE=("$BIN" train --model tinycnn --data fashion-mnist --augment none --batch $BATCH
         --optimizer nesterov --lr $LR --lr-schedule onecycle --epochs $EPOCHS
         --label-smoothing $SMOOTH --weight-decay $WD --target-accuracy $TARGET --display-every 0
         --threads 2)
PEER=(/usr/bin/python3 "$ROOT/bench/tta_peer.py" --batch $BATCH --lr $LR --epochs $EPOCHS
      --label-smoothing $SMOOTH --weight-decay $WD --target $TARGET --threads 2)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
now() { date +%s.%N; }
for ((i = 1; i <= ROUNDS; i++)); do
  for tool in dlscale peer; do
    t0=$(now)
    if [[ $tool == dlscale ]]; then
      "${DLSCALE[@]}" --seed $i > "$OUT/log" 2>&1 || true
      tta=$(grep -oP 'time to [0-9.]+% top-1: \K[0-9.]+' "$OUT/log" || echo nan)
    else
      "${PEER[@]}" --seed $i > "$OUT/log" 2>&1 || true
      tta=$(grep -oP 'status: success.*' "$OUT/log" > /dev/null && grep -oP 'time to accuracy: \K[0-9.]+' "$OUT/log" || echo nan)
    fi
    wall=$(echo "$(now) - $t0" | bc -l)
    printf "round %d %-8s wall %6.2f s  tta %s s\n" "$i" "$tool" "$wall" "$tta"
    echo "$wall" >> "$OUT/$tool.wall"
    echo "$tta" >> "$OUT/$tool.tta"
  done
done
for tool in dlscale peer; do
  printf "%-8s median wall %6.2f s  median tta %6.2f s  (runs not reaching the target: %d)\n" \
    "$tool" "$(median < "$OUT/$tool.wall")" "$(grep -v nan "$OUT/$tool.tta" | median)" \
    "$(grep -c nan "$OUT/$tool.tta" || true)"
done
dw=$(median < "$OUT/dlscale.wall"); pw=$(median < "$OUT/peer.wall")
printf "dlscale / peer wall time: %.3f  (goal <= 0.85)\n" "$(echo "$dw / $pw" | bc -l)"
