#!/usr/bin/env bash
# Runs every harness built by fuzz/build.sh for the given number of
# executions, starting from seed corpora (the examples' sweep files, a list of
# expressions, a few store requests, the files in fuzz/seeds/fuzz_records/)
# kept under OUT_DIR/corpus so that later runs continue where earlier ones
# stopped. Crashes are written to OUT_DIR/artifacts; the script fails if any
# harness crashed or hung. FUZZ_JOBS harnesses (default: the cores) run at
# once; their summaries come in a fixed order when all have ended.
#
#   fuzz/run.sh [OUT_DIR] [RUNS] [LIBFUZZER FLAGS...]   (defaults: build-fuzz, 1000000)
#
# `make test` passes -seed=1 so that its short run is the same every time.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build-fuzz}
runs=${2:-1000000}
shift $(( $# < 2 ? $# : 2 ))
extra=("$@")
mkdir -p "$out/artifacts"

seed() {
  local name=$1 dir=$out/corpus/$1
  [ -d "$dir" ] && return
  mkdir -p "$dir"
  case $name in
    fuzz_expression)
      local i=0
      while IFS= read -r line; do printf '%s' "$line" > "$dir/seed$((i++))"; done < "$root/fuzz/seeds/expression.txt" ;;
    fuzz_sweep_file)
      cp "$root"/examples/*.yaml "$root"/fuzz/seeds/fuzz_sweep_file/*.yaml "$dir/" ;;
    fuzz_store)
      # first byte odd = after a valid hello; then SET k=v, GET k (10 ms), ADD n+1.
      printf '\001\001\001\000\000\000k\001\000\000\000v' > "$dir/set"
      printf '\001\002\001\000\000\000k\002\000\000\00010' > "$dir/get"
      printf '\001\003\001\000\000\000n\001\000\000\0001' > "$dir/add"
      printf '\000\004\017\000\000\000dlscale-store/1\005\000\000\000guess' > "$dir/hello" ;;
    fuzz_idx)
      # byte 0: where the images file ends (180/255 of the rest); byte 1: which
      # files the harness gzips; then a 2-image 2x2 IDX file and its 2 labels.
      printf '\264\000\000\000\010\003\000\000\000\002\000\000\000\002\000\000\000\002\001\002\003\004\005\006\007\010\000\000\010\001\000\000\000\002\001\011' > "$dir/two"
      printf '\264\003\000\000\010\003\000\000\000\002\000\000\000\002\000\000\000\002\001\002\003\004\005\006\007\010\000\000\010\001\000\000\000\002\001\011' > "$dir/two-gz" ;;
    fuzz_records)
      # a JPEG, PNGs, an Example, a TFRecord file and tar files (ours and GNU tar's).
      cp "$root"/fuzz/seeds/fuzz_records/* "$dir/" ;;
    fuzz_shard_index)
      # a TFRecord and a WebDataset sidecar's body (odd first byte: the harness
      # appends the checksum), and a whole sidecar (even).
      printf '\001dlscale-shard-index 1 tfrecord\nshard-bytes 300 mtime-ns 5 samples 2 labels 3 7\n0 100 3\n100 200 7\n' > "$dir/tfrecord"
      printf '\001dlscale-shard-index 1 wds\nshard-bytes 4096 mtime-ns 5 samples 2 labels 0 1\n512 10 0 a 1\n1536 20 1 b%%25\n' > "$dir/wds"
      printf '\000dlscale-shard-index 1 wds\nshard-bytes 4096 mtime-ns 5 samples 0 labels 0 -1\ncrc32c 00000000\n' > "$dir/whole" ;;
    fuzz_checkpoint)
      # a real checkpoint's metadata (odd first byte: framed by the harness),
      # and a whole checkpoint file with empty tensor sections (even).
      cp "$root"/fuzz/seeds/fuzz_checkpoint/* "$dir/" ;;
    fuzz_task_file)
      # the worked example's declared task, and the three built-in ones.
      cp "$root"/examples/own-model/encoder.task.yaml "$dir/"
      printf 'task: image-classification\nchannels: 1\nimage_size: 28\n' > "$dir/image"
      printf 'task: translation\nseq_len: 24\nlabel_smoothing: 0.1\n' > "$dir/translation"
      printf 'task: recommendation\nusers: 600\nitems: 2000\n' > "$dir/recommendation" ;;
  esac
}

# fuzz_one NAME: runs one harness; its summary goes to OUT_DIR/NAME.summary,
# and its exit status says whether it crashed or hung.
fuzz_one() {
  local name=$1 bin=$out/$1 log=$out/$1.log start rc execs crashes
  start=$(date +%s)
  local own=()
  # The store serves each connection on its own thread, which may still be
  # ending when libFuzzer's per-input leak check looks: that check reports
  # buffers those threads are about to free, so it is off for this harness.
  [ "$name" = fuzz_store ] && own=(-detect_leaks=0)
  "$bin" "$out/corpus/$name" -runs="$runs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/artifacts/$name-" -print_final_stats=1 "${own[@]}" "${extra[@]}" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=$(ls "$out/artifacts" 2>/dev/null | grep -c "^$name-" || true)
  {
    echo "$name: ${execs:-?} executions in $(( $(date +%s) - start )) s, exit $rc, $crashes artifact(s)"
    [ "$rc" -eq 0 ] || grep -E "ERROR|SUMMARY|Test unit written|^fuzz_|terminate|what\(\)" "$log" | head -8
  } >"$out/$name.summary"
  return "$rc"
}

# The harnesses, FUZZ_JOBS (default: the cores) at a time; their summaries
# in this order once all have ended.
names=(fuzz_expression fuzz_sweep_file fuzz_store fuzz_records fuzz_idx fuzz_shard_index fuzz_checkpoint
       fuzz_task_file)
# shellcheck source=fuzz/jobs.sh
. "$root/fuzz/jobs.sh"
for name in "${names[@]}"; do
  [ -x "$out/$name" ] || { echo "fuzz: $out/$name is missing (run fuzz/build.sh)" >&2; exit 2; }
  seed "$name"
done
for name in "${names[@]}"; do job_start fuzz_one "$name"; done
failed=0
jobs_wait || failed=1
for name in "${names[@]}"; do cat "$out/$name.summary"; done
exit $failed
