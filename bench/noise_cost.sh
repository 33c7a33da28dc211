#!/usr/bin/env bash
# What measuring the gradient noise scale costs a training run: the same
# `train` with --noise-every 0 (never), the default (every 10th step) and
# --noise-every 1 (every step), alternating in each round, and each run's
# measured throughput (results.samples_per_sec) against the never run of
# its round. Prints every round and the medians.
#
#   bench/noise_cost.sh [--rounds R] [--dlscale PATH] [-- TRAIN ARGS...]
#
#   --rounds R     alternating rounds (default 7)
#   --dlscale P    the dlscale binary (default build/dlscale)
#   TRAIN ARGS     the run (default: resnet18 at 32x32, 2 workers of one
#                  thread, batch 16, 60 steps of which 10 warm-up)
set -euo pipefail

rounds=7
dlscale=build/dlscale
args=(--model resnet18 --image-size 32 --workers 2 --threads 1 --batch 16 --steps 60
      --warmup 10 --display-every 0)
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a count}; shift 2 ;;
    --dlscale) dlscale=${2:?--dlscale needs a path}; shift 2 ;;
    --) shift; args=("$@"); break ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "noise_cost: unknown option '$1' (allowed: --rounds R, --dlscale PATH, -- TRAIN ARGS)" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "noise_cost: --rounds must be a positive count (got '$rounds')" >&2; exit 2; }
[ -x "$dlscale" ] || { echo "noise_cost: '$dlscale' is not an executable dlscale" >&2; exit 2; }

tmp=$(mktemp -d /tmp/dlscale-noise-cost.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
declare -A flags=([never]="--noise-every 0" [every10]="" [every1]="--noise-every 1")

for r in $(seq 1 "$rounds"); do
  for kind in never every10 every1; do
    # shellcheck disable=SC2086
    "$dlscale" train "${args[@]}" ${flags[$kind]} --json "$tmp/$kind.$r.json" >"$tmp/$kind.$r.log" 2>&1 ||
      { echo "noise_cost: round $r ($kind) failed; its output:" >&2; cat "$tmp/$kind.$r.log" >&2; exit 1; }
  done
  echo "noise_cost: round $r of $rounds done" >&2
done

/usr/bin/python3 - "$tmp" "$rounds" <<'EOF'
import json, statistics, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def rate(kind, r):
    with open(f"{tmp}/{kind}.{r}.json") as f:
        rec = json.load(f)
    return rec["results"]["samples_per_sec"], rec["results"]["noise"]
ratios = {"every10": [], "every1": []}
print("round  never (samples/s)  every 10th: time ratio  every step: time ratio")
for r in range(1, rounds + 1):
    base, none = rate("never", r)
    assert none is None, "the --noise-every 0 run measured a noise scale"
    row = []
    for kind in ("every10", "every1"):
        s, noise = rate(kind, r)
        assert noise is not None, f"the {kind} run recorded no noise scale"
        ratios[kind].append(base / s)  # > 1: the measuring run is slower
        row.append(base / s)
    print(f"{r:5d}  {base:17.2f}  {row[0]:22.4f}  {row[1]:22.4f}")
for kind, label in (("every10", "every 10th step (the default)"), ("every1", "every step")):
    v = ratios[kind]
    print(f"{label}: median time ratio {statistics.median(v):.4f} "
          f"(range {min(v):.4f}-{max(v):.4f}, {len(v)} rounds)")
EOF
