#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang (Debian's clang and
# libclang-rt-14-dev, installed by scripts/setup.sh test) under
# AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Each source is compiled once into OUT_DIR/obj/, however many harnesses
# link it, FUZZ_JOBS (default: the cores) at a time; a harness is relinked
# when one of its objects changed.
#
#   fuzz/build.sh [OUT_DIR]      (default build-fuzz)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-build-fuzz}
mkdir -p "$out"
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (scripts/setup.sh test)" >&2; exit 2; }
flags=(-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$root/src" -DDLSCALE_FUZZ)
# shellcheck source=fuzz/jobs.sh
. "$root/fuzz/jobs.sh"
objdir=$out/obj
mkdir -p "$objdir"

# The object of a source file: OUT_DIR/obj/<path with / as _>.o.
object_of() {
  local rel=${1#"$root"/}
  echo "$objdir/${rel//\//_}.o"
}

# Whether `target` is newer than every one of `inputs`, the headers of src/
# and fuzz/, and this script.
up_to_date() {
  local target=$1; shift
  [ -e "$target" ] && [ -z "$(find "$@" "$0" -newer "$target" -print -quit)" ] &&
    [ -z "$(find "$root/src" "$root/fuzz" -name '*.h' -newer "$target" -print -quit)" ]
}

# Compiles one source; the object appears only when complete, so that a
# killed build leaves none that looks up to date.
compile_one() {
  clang++ "${flags[@]}" -c "$1" -o "$2.tmp" && mv "$2.tmp" "$2"
}

# Compiles each source once, however many harnesses link it, FUZZ_JOBS at a time.
compile_all() {
  local src obj
  for src in "$@"; do
    obj=$(object_of "$src")
    up_to_date "$obj" "$src" && continue
    echo "fuzz: compiling ${src#"$root"/}"
    job_start compile_one "$src" "$obj"
  done
  jobs_wait
}

# harness NAME SOURCES... [-lLIB...]: the harness fuzz/NAME.cpp with the sources it tests.
names=()
declare -A sources libraries
harness() {
  local name=$1; shift
  names+=("$name")
  sources[$name]="$root/fuzz/$name.cpp"
  libraries[$name]=""
  for a in "$@"; do
    case $a in -l*) libraries[$name]+=" $a" ;; *) sources[$name]+=" $a" ;; esac
  done
}
sweep=("$root/src/sweep/expression.cpp" "$root/src/sweep/params.cpp" "$root/src/core/text.cpp")
harness fuzz_expression "${sweep[@]}"
harness fuzz_sweep_file "${sweep[@]}" "$root/src/sweep/sweep_file.cpp" "$root/src/sweep/planner.cpp" \
  "$root/src/cluster/cluster_spec.cpp" "$root/src/core/files.cpp" "$root/src/core/text_table.cpp" -lre2
harness fuzz_store "$root/src/comm/tcp_store.cpp" "$root/src/core/log.cpp" "$root/src/core/clock.cpp"
harness fuzz_records "$root/src/data/tfrecord.cpp" "$root/src/data/tar_shards.cpp" \
  "$root/src/data/image_codec.cpp" "$root/src/core/files.cpp" -ljpeg -lpng
harness fuzz_idx "$root/src/data/idx_dataset.cpp" "$root/src/data/file_list.cpp" "$root/src/core/files.cpp" -lz
harness fuzz_shard_index "$root/src/data/shard_index.cpp" "$root/src/data/tfrecord.cpp" \
  "$root/src/data/tar_shards.cpp" "$root/src/core/files.cpp"
harness fuzz_checkpoint "$root/src/train/checkpoint_meta.cpp" "$root/src/train/convergence.cpp" \
  "$root/src/train/recipe.cpp" "$root/src/core/text.cpp"
harness fuzz_task_file "$root/src/models/task_file.cpp" "$root/src/core/files.cpp" "$root/src/core/text.cpp"

# Every source once, then each harness linked from its objects.
mapfile -t all < <(for n in "${names[@]}"; do tr ' ' '\n' <<<"${sources[$n]}"; done | sort -u)
compile_all "${all[@]}" || { echo "fuzz: compiling failed" >&2; exit 1; }
for name in "${names[@]}"; do
  objects=()
  for src in ${sources[$name]}; do objects+=("$(object_of "$src")"); done
  if up_to_date "$out/$name" "${objects[@]}"; then
    echo "fuzz: $name is up to date"
    continue
  fi
  echo "fuzz: linking $name"
  # shellcheck disable=SC2086 # libraries[] holds -l words
  clang++ "${flags[@]}" "${objects[@]}" -o "$out/$name" ${libraries[$name]} -lfmt -lyaml-cpp -lpthread
done
