#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (Debian's clang and
# libclang-rt-14-dev, installed by scripts/setup.sh test) under
# AddressSanitizer and UndefinedBehaviorSanitizer.
#
#   fuzz/build.sh [OUT_DIR]      (default build-fuzz)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build-fuzz}
mkdir -p "$out"
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (scripts/setup.sh test)" >&2; exit 2; }
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/src" -DDLSCALE_FUZZ)
# build NAME SOURCES... [-lLIB...]: the harness fuzz/NAME.cpp with the sources it tests.
build() {
  local name=$1; shift
  local srcs=() libs=()
  for a in "$@"; do
    case $a in -l*) libs+=("$a") ;; *) srcs+=("$a") ;; esac
  done
  # Up to date when newer than its sources, the headers and this script.
  if [ -x "$out/$name" ] && [ -z "$(find "$root/fuzz/$name.cpp" "${srcs[@]}" "$root/src" "$0" -newer "$out/$name" \
        \( -name '*.cpp' -o -name '*.h' -o -name '*.sh' \) -print -quit)" ]; then
    echo "fuzz: $name is up to date"
    return
  fi
  echo "fuzz: building $name"
  clang++ "${flags[@]}" "$root/fuzz/$name.cpp" "${srcs[@]}" -o "$out/$name" "${libs[@]}" \
    -lfmt -lyaml-cpp -lpthread
}
sweep=("$root/src/sweep/expression.cpp" "$root/src/sweep/params.cpp" "$root/src/core/text.cpp")
build fuzz_expression "${sweep[@]}"
build fuzz_sweep_file "${sweep[@]}" "$root/src/sweep/sweep_file.cpp" "$root/src/sweep/planner.cpp" \
  "$root/src/core/files.cpp" "$root/src/core/text_table.cpp" -lre2
build fuzz_store "$root/src/comm/tcp_store.cpp" "$root/src/core/log.cpp" "$root/src/core/clock.cpp"
build fuzz_records "$root/src/data/tfrecord.cpp" "$root/src/data/tar_shards.cpp" \
  "$root/src/data/image_codec.cpp" "$root/src/core/files.cpp" -ljpeg -lpng
build fuzz_idx "$root/src/data/idx_dataset.cpp" "$root/src/data/file_list.cpp" "$root/src/core/files.cpp" -lz
build fuzz_shard_index "$root/src/data/shard_index.cpp" "$root/src/data/tfrecord.cpp" \
  "$root/src/data/tar_shards.cpp" "$root/src/core/files.cpp"
build fuzz_checkpoint "$root/src/train/checkpoint_meta.cpp" "$root/src/train/convergence.cpp" \
  "$root/src/train/recipe.cpp" "$root/src/core/text.cpp"
build fuzz_task_file "$root/src/models/task_file.cpp" "$root/src/core/files.cpp" "$root/src/core/text.cpp"
