#!/usr/bin/env bash
# Prints the libraries that LibTorch lists as needed (DT_NEEDED) but takes
# no symbol from, among OpenCV's and FFmpeg's: Debian's libtorch_cpu lists
# 17 of them (its Caffe2 part was built against them), and loading them
# pulls in some 210 more libraries (GDAL, codecs, ...), about half of a
# LibTorch start's CPU. The build puts empty stand-ins of these names in
# build/unused-libs, which `dlscale` puts first on dlscale-torch's library
# path (docs/architecture.md, "Two executables"). One name a line; none when
# the library needs none of them (a pip wheel's LibTorch).
#
#   scripts/libtorch_unused.sh LIBTORCH_CPU
set -euo pipefail

lib=${1:?usage: libtorch_unused.sh LIBTORCH_CPU}
[ -r "$lib" ] || { echo "libtorch_unused: cannot read '$lib'" >&2; exit 2; }
needed=$(objdump -p "$lib" | awk '$1 == "NEEDED" { print $2 }' |
  grep -E '^lib(opencv_[a-z0-9_]+|avcodec|avformat|avutil|avdevice|avfilter|swscale|swresample)\.so\.' || true)
[ -n "$needed" ] || exit 0
# The symbols the library takes from others, without their version suffix.
wanted=$(mktemp)
trap 'rm -f "$wanted"' EXIT
nm -D --undefined-only "$lib" | awk '{ print $NF }' | sed 's/@.*//' | sort -u >"$wanted"
# Where the loader finds each (ldd: "NAME => PATH (ADDRESS)").
found=$(ldd "$lib" 2>/dev/null || true)
for name in $needed; do
  path=$(awk -v n="$name" '$1 == n && $3 ~ /^\// { print $3 }' <<<"$found")
  [ -n "$path" ] || continue  # not found: left alone
  # Kept if the library takes any symbol it defines (every stage reads all
  # its input: no early exit, no SIGPIPE under pipefail).
  taken=$(nm -D --defined-only "$path" | awk '{ print $NF }' | sed 's/@.*//' | sort -u |
    comm -12 - "$wanted" | wc -l)
  if [ "$taken" -eq 0 ]; then echo "$name"; fi
done
