#!/usr/bin/env bash
# Data at ImageNet scale (docs/data.md, "Index sidecars" and "Reduced
# decoding"), on a seeded ImageNet-shaped set made once: IMAGES (default
# 50000) 500x375 JPEGs at quality 90 (bench/make_image_folder.py), packed
# into 64 TFRecord and 64 WebDataset shards with their index sidecars.
#
#   IMAGES=5000 bash bench/data_scale_bench.sh       # ROOT=/tmp/dlscale-scale, ROUNDS=3
#   COLD=1 ...                                        # as root: page cache dropped before each open
#
# 1. Open: the wall time and peak RSS of `data bench --steps 1 --warmup 0`
#    (start, open, one batch of 32 at 224) and of `train --workers 2` for
#    2 steps of resnet18 at 32x32 (global order, and --data-order streaming,
#    where each worker opens only its own half of the shards), on each
#    format, with the indexes and with them moved away (a scan), alternately,
#    medians of ROUNDS.
# 2. Pipeline images/s at SIZE (default 224; also 112) with rrc-flip, 2
#    threads: reduced decoding (the crop only, at a reduced scale) against --full-decode, alternately, and
#    PyTorch's DataLoader (torchvision ImageFolder, the same transforms, 2
#    workers) on the JPEG folder.
# 3. Listing an image folder of FILES (default 1000000) files (1,000 32x32
#    JPEGs hard-linked under 1,000 names each, 1,000 classes): wall time and
#    peak RSS of `data bench --steps 1` (open, one batch) against the same
#    on a folder of the 1,000 JPEGs alone, and of `data inspect`.
#
#   PARTS="3" bash bench/data_scale_bench.sh          # only part 3 (default "1 2 3")
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGES=${IMAGES:-50000}
ROOT=${ROOT:-/tmp/dlscale-scale}
ROUNDS=${ROUNDS:-3}
PY=/usr/bin/python3
D=build/dlscale
PARTS=${PARTS:-1 2 3}
FILES=${FILES:-1000000}
part() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# timed OUT CMD...: appends "seconds maxrss_mb" of one run to OUT (with
# COLD=1, as root, after dropping the page cache: the data comes from disk).
timed() {
  local out=$1; shift
  if [ "${COLD:-0}" = 1 ]; then sync; echo 3 > /proc/sys/vm/drop_caches; fi
  if ! /usr/bin/time -f "%e %M" -o "$ROOT/time.txt" "$@" >"$ROOT/cmd.log" 2>&1; then
    echo "failed: $* (last line: $(tail -1 "$ROOT/cmd.log"))" >&2
    exit 1
  fi
  awk '{printf "%s %.0f\n", $1, $2 / 1024}' "$ROOT/time.txt" >> "$out"
}
mkdir -p "$ROOT"

if part 3; then
  many="$ROOT/files-$FILES"
  few="$ROOT/files-1000"
  for dir in "$many" "$few"; do
    if [ ! -d "$dir" ]; then
      "$PY" bench/make_image_folder.py "$dir.tmp" --images 1000 --classes 1000 --size 32 --files "${dir##*-}"
      mv "$dir.tmp" "$dir"
    fi
  done
  echo "== 3. listing $FILES files (medians of $ROUNDS): wall s, peak RSS MB"
  rm -f "$ROOT"/folder "$ROOT"/few "$ROOT"/inspect
  for _ in $(seq "$ROUNDS"); do
    timed "$ROOT/folder" $D data bench --data "folder:$many" --steps 1 --warmup 0 --batch 32 --image-size 32
    timed "$ROOT/few" $D data bench --data "folder:$few" --steps 1 --warmup 0 --batch 32 --image-size 32
    timed "$ROOT/inspect" $D data inspect "folder:$many"
  done
  for job in folder few inspect; do
    printf '%-10s %6s s %5s MB\n' "$job" "$(cut -d' ' -f1 "$ROOT/$job" | median)" \
      "$(cut -d' ' -f2 "$ROOT/$job" | median)"
  done
fi
part 1 || part 2 || exit 0

set_dir="$ROOT/set-$IMAGES"
mkdir -p "$set_dir"
if [ ! -d "$set_dir/folder" ]; then
  "$PY" bench/make_image_folder.py "$set_dir/folder.tmp" --images "$IMAGES" --width 500 --height 375 \
    --classes 100 --quality 90
  mv "$set_dir/folder.tmp" "$set_dir/folder"
fi
for f in tfrecord wds; do
  if [ ! -d "$set_dir/$f" ]; then
    $D data pack "folder:$set_dir/folder" "$set_dir/$f.tmp" --format $f --shards 64 --encoding jpeg 2>/dev/null
    mv "$set_dir/$f.tmp" "$set_dir/$f"
  fi
done
echo "set: $IMAGES JPEGs, $(du -sh "$set_dir/folder" | cut -f1); shards: $(ls "$set_dir/tfrecord" | grep -vc dlsidx) TFRecord"

# The sidecars moved into a hidden folder (which readers skip) and back.
hide() { mkdir -p "$1/.off" && mv "$1"/*.dlsidx "$1/.off/"; }
show() { mv "$1"/.off/*.dlsidx "$1/" && rmdir "$1/.off"; }

part 1 && echo "== 1. open (medians of $ROUNDS): wall s, peak RSS MB"
part 1 && for f in tfrecord wds; do
  for job in bench train2 stream2; do
    rm -f "$ROOT"/indexed "$ROOT"/scanned
    for _ in $(seq "$ROUNDS"); do
      for mode in indexed scanned; do
        [ $mode = scanned ] && hide "$set_dir/$f"
        if [ $job = bench ]; then
          timed "$ROOT/$mode" $D data bench --data "$f:$set_dir/$f" --steps 1 --warmup 0 --batch 32 --image-size 224
        else
          order=$([ $job = stream2 ] && echo streaming || echo global)
          timed "$ROOT/$mode" $D train --model resnet18 --image-size 32 --batch 8 --steps 2 --warmup 1 \
            --workers 2 --threads 1 --data "$f:$set_dir/$f" --data-order $order --display-every 0
        fi
        [ $mode = scanned ] && show "$set_dir/$f"
      done
    done
    printf '%-9s %-22s indexed %6s s %5s MB   scanned %6s s %5s MB\n' "$f" \
      "$(case $job in bench) echo 'data bench, 1 process' ;; train2) echo 'train, 2 workers' ;;
         *) echo 'train, 2, streaming' ;; esac)" \
      "$(cut -d' ' -f1 "$ROOT/indexed" | median)" "$(cut -d' ' -f2 "$ROOT/indexed" | median)" \
      "$(cut -d' ' -f1 "$ROOT/scanned" | median)" "$(cut -d' ' -f2 "$ROOT/scanned" | median)"
  done
done

part 2 || exit 0
echo "== 2. pipeline images/s, rrc-flip, 2 threads (medians of $ROUNDS)"
rate() {
  "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print(round(j.get('results', j)['samples_per_sec'], 1))" "$1"
}
for size in 224 112; do
  : > "$ROOT/reduced"; : > "$ROOT/full"; : > "$ROOT/peer"
  for _ in $(seq "$ROUNDS"); do
    $D data bench --data "tfrecord:$set_dir/tfrecord" --image-size $size --augment rrc-flip --data-threads 2 \
      --batch 64 --steps 30 --warmup 3 --json "$ROOT/r.json" >/dev/null 2>&1
    rate "$ROOT/r.json" >> "$ROOT/reduced"
    $D data bench --data "tfrecord:$set_dir/tfrecord" --image-size $size --augment rrc-flip --data-threads 2 \
      --batch 64 --steps 30 --warmup 3 --full-decode --json "$ROOT/r.json" >/dev/null 2>&1
    rate "$ROOT/r.json" >> "$ROOT/full"
    "$PY" bench/data_loader_peer.py --data "folder:$set_dir/folder" --image-size $size --batch 64 --workers 2 \
      --steps 30 --warmup 3 --json "$ROOT/p.json" >/dev/null 2>&1
    rate "$ROOT/p.json" >> "$ROOT/peer"
  done
  r=$(median < "$ROOT/reduced"); f=$(median < "$ROOT/full"); p=$(median < "$ROOT/peer")
  printf '%s: reduced %s, full %s (reduced/full %.2fx), DataLoader %s (dlscale/DataLoader %.2fx)\n' \
    "$size" "$r" "$f" "$(echo "$r / $f" | bc -l)" "$p" "$(echo "$r / $p" | bc -l)"
done
