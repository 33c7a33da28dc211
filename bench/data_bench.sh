#!/usr/bin/env bash
# The input pipeline alone against its PyTorch peer: `dlscale data bench`
# and bench/data_loader_peer.py (torch DataLoader + torchvision), same data,
# batch, image size, transforms and number of decode threads / workers, run
# alternately (A B B A ...) R rounds per case; prints medians, their min-max
# spread and the ratio dlscale / peer. Then a prefetch check: dlscale with
# --prefetch 0 against --prefetch 2, alternately.
#
#   bash bench/data_bench.sh [--dlscale build/dlscale] [--rounds 5] [--seconds 3]
#                            [--folder /tmp/dlscale-jpeg-folder] [--threads "1 2"]
#
# Cases: (a) fashion-mnist (Debian's IDX files), 28x28, batch 256, crop-flip;
# (b) a folder of 2000 seeded 128x128 JPEGs (bench/make_image_folder.py,
# made once), 112x112, batch 64, random-resized crop + flip. Each side's
# batch count comes from a short pilot run so that a timed run lasts at least
# --seconds (default 3; the table's last column shows the shortest run).
set -euo pipefail
shopt -s inherit_errexit

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY=/usr/bin/python3
DLSCALE="$HERE/../build/dlscale"
ROUNDS=5
SECONDS_PER_RUN=3
FOLDER=/tmp/dlscale-jpeg-folder
THREADS="1 2"
WARMUP=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dlscale) DLSCALE="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --seconds) SECONDS_PER_RUN="$2"; shift 2 ;;
    --folder) FOLDER="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
if (( ROUNDS < 3 )); then echo "--rounds must be >= 3: medians of fewer runs are not worth quoting" >&2; exit 2; fi
if (( SECONDS_PER_RUN < 3 )); then echo "--seconds must be >= 3" >&2; exit 2; fi
[[ -x "$DLSCALE" ]] || { echo "no dlscale binary at $DLSCALE (--dlscale)" >&2; exit 2; }

if [[ ! -d "$FOLDER/class_00" ]]; then
  "$PY" "$HERE/make_image_folder.py" "$FOLDER" --images 2000 --size 128
fi

WORK="$(mktemp -d /tmp/dlscale-data-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
RESULTS="$WORK/results.tsv"   # kind case threads side rate wall
: >"$RESULTS"

# rate_wall JSON: "samples/s wall_s" from either side's record.
rate_wall() { jq -r '(.results // .) | "\(.samples_per_sec) \(.wall_s)"' "$1"; }

# run_dlscale DATA SIZE BATCH THREADS STEPS PREFETCH -> "rate wall"
run_dlscale() {
  "$DLSCALE" data bench --data "$1" --image-size "$2" --batch "$3" --data-threads "$4" \
    --steps "$5" --warmup "$WARMUP" --prefetch "$6" --json "$WORK/run.json" >/dev/null
  rate_wall "$WORK/run.json"
}

# run_peer DATA SIZE BATCH WORKERS STEPS -> "rate wall"
run_peer() {
  "$PY" "$HERE/data_loader_peer.py" --data "$1" --image-size "$2" --batch "$3" --workers "$4" \
    --steps "$5" --warmup "$WARMUP" --json "$WORK/run.json" >/dev/null
  rate_wall "$WORK/run.json"
}

# steps_for RATE BATCH: batches that last 1.5 x SECONDS_PER_RUN at RATE samples/s.
steps_for() { "$PY" -c "import math; print(max(20, math.ceil(1.5 * $SECONDS_PER_RUN * $1 / $2)))"; }

# pilot SIDE DATA SIZE BATCH THREADS PREFETCH -> the higher rate of a 20-batch
# run and a ~1 s run (a short pilot can come out slow on a busy machine, and
# then every timed run would be too short).
pilot() {
  local side=$1 rate rate2 steps res
  shift
  if [[ $side == dlscale ]]; then
    res=$(run_dlscale "$1" "$2" "$3" "$4" 20 "$5"); read -r rate _ <<<"$res"
    steps=$("$PY" -c "import math; print(max(20, math.ceil($rate / $3)))")
    res=$(run_dlscale "$1" "$2" "$3" "$4" "$steps" "$5"); read -r rate2 _ <<<"$res"
  else
    res=$(run_peer "$1" "$2" "$3" "$4" 20); read -r rate _ <<<"$res"
    steps=$("$PY" -c "import math; print(max(20, math.ceil($rate / $3)))")
    res=$(run_peer "$1" "$2" "$3" "$4" "$steps"); read -r rate2 _ <<<"$res"
  fi
  "$PY" -c "print(max($rate, $rate2))"
}

echo "dlscale data bench vs PyTorch DataLoader (torch $("$PY" -c 'import torch; print(torch.__version__)'), torchvision $("$PY" -c 'import torchvision; print(torchvision.__version__)'))"
echo "binary: $DLSCALE"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rounds: $ROUNDS (alternating A B B A ...), timed runs sized for >= ${SECONDS_PER_RUN} s, $WARMUP warm-up batches"
echo "T = dlscale --data-threads T (plus its main and prefetch threads) vs DataLoader num_workers=T"
echo "    (worker processes, plus the main process that receives the batches)"
echo

CASES=(
  "fashion-mnist|fashion-mnist|28|256"
  "jpeg-folder|folder:$FOLDER|112|64"
)
START=$(date +%s)
for spec in "${CASES[@]}"; do
  IFS='|' read -r name data size batch <<<"$spec"
  for t in $THREADS; do
    dl_rate=$(pilot dlscale "$data" "$size" "$batch" "$t" 2)
    pe_rate=$(pilot peer "$data" "$size" "$batch" "$t" 2)
    dl_steps=$(steps_for "$dl_rate" "$batch")
    pe_steps=$(steps_for "$pe_rate" "$batch")
    printf '%s T=%s: dlscale %s batches, peer %s batches per run (pilot: %.1f vs %.1f samples/s), load %s\n' \
      "$name" "$t" "$dl_steps" "$pe_steps" "$dl_rate" "$pe_rate" "$(cut -d' ' -f1 /proc/loadavg)"
    for ((r = 0; r < ROUNDS; ++r)); do
      if (( r % 2 == 0 )); then order="dlscale peer"; else order="peer dlscale"; fi
      for side in $order; do
        if [[ $side == dlscale ]]; then
          res=$(run_dlscale "$data" "$size" "$batch" "$t" "$dl_steps" 2); read -r rate wall <<<"$res"
        else
          res=$(run_peer "$data" "$size" "$batch" "$t" "$pe_steps"); read -r rate wall <<<"$res"
        fi
        printf 'peer\t%s\t%s\t%s\t%s\t%s\n' "$name" "$t" "$side" "$rate" "$wall" >>"$RESULTS"
        printf '  round %d %-7s %10.1f samples/s (%.2f s)\n' "$((r + 1))" "$side" "$rate" "$wall"
      done
    done
  done
done

# (c) Prefetch check: the JPEG folder at T=1, --prefetch 0 vs --prefetch 2.
data="folder:$FOLDER"; size=112; batch=64; t=1
p_rate=$(pilot dlscale "$data" "$size" "$batch" "$t" 0)
p_steps=$(steps_for "$p_rate" "$batch")
echo "prefetch check (jpeg-folder, T=1): $p_steps batches per run, load $(cut -d' ' -f1 /proc/loadavg)"
for ((r = 0; r < ROUNDS; ++r)); do
  if (( r % 2 == 0 )); then order="0 2"; else order="2 0"; fi
  for k in $order; do
    res=$(run_dlscale "$data" "$size" "$batch" "$t" "$p_steps" "$k"); read -r rate wall <<<"$res"
    printf 'prefetch\tjpeg-folder\t%s\tprefetch%s\t%s\t%s\n' "$t" "$k" "$rate" "$wall" >>"$RESULTS"
    printf '  round %d prefetch %s %10.1f samples/s (%.2f s)\n' "$((r + 1))" "$k" "$rate" "$wall"
  done
done
echo
echo "total time: $(( $(date +%s) - START )) s, load average now $(cut -d' ' -f1-3 /proc/loadavg)"
echo

"$PY" - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
def runs(kind, case, t, side):
    return [(float(r[4]), float(r[5])) for r in rows if r[:4] == [kind, case, t, side]]
def cell(v):
    rates = [x for x, _ in v]
    return "%.1f" % statistics.median(rates), "%.1f-%.1f" % (min(rates), max(rates))
keys = []
for r in rows:
    if r[0] == "peer" and (r[1], r[2]) not in keys:
        keys.append((r[1], r[2]))
print("| case | T | dlscale samples/s (median) | min-max | peer samples/s (median) | min-max "
      "| dlscale / peer | shortest run s |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for case, t in keys:
    a, b = runs("peer", case, t, "dlscale"), runs("peer", case, t, "peer")
    ma, ra = cell(a); mb, rb = cell(b)
    ratio = statistics.median(x for x, _ in a) / statistics.median(x for x, _ in b)
    print("| %s | %s | %s | %s | %s | %s | **%.2f** | %.1f |" % (
        case, t, ma, ra, mb, rb, ratio, min(w for _, w in a + b)))
p0, p2 = runs("prefetch", "jpeg-folder", "1", "prefetch0"), runs("prefetch", "jpeg-folder", "1", "prefetch2")
if p0 and p2:
    print()
    print("| prefetch check (jpeg-folder, T=1) | samples/s (median) | min-max |")
    print("|---|---:|---:|")
    for name, v in (("--prefetch 0", p0), ("--prefetch 2", p2)):
        m, rng = cell(v)
        print("| %s | %s | %s |" % (name, m, rng))
    ratio = statistics.median(x for x, _ in p2) / statistics.median(x for x, _ in p0)
    spread = max(max(x for x, _ in v) / min(x for x, _ in v) - 1 for v in (p0, p2))
    print("| prefetch 2 / prefetch 0 | **%.3f** | (largest min-max spread of either: %.1f%%) |"
          % (ratio, 100 * spread))
EOF
