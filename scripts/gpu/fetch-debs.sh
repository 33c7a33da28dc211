#!/usr/bin/env bash
# Run on a Debian 12 machine with network access (the development machine):
# downloads the Debian packages that a CUDA build of dlscale needs beside a
# CUDA PyTorch install into .gpu/debs/ (ignored by git). scripts/gpu/build.sh
# unpacks them on the GPU machine, which has no network. Nothing is
# installed here. See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=${1:-.gpu/debs}

# Headers and libraries of everything dlscale links besides LibTorch, CUDA,
# NCCL and MPI (those come from the GPU machine), plus GoogleTest.
packages=(
  libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200
  libyaml-cpp-dev libyaml-cpp0.7 libfmt-dev libfmt9 libcli11-dev nlohmann-json3-dev
  libsqlite3-dev libsqlite3-0 libre2-dev libre2-9 zlib1g-dev zlib1g
  libjpeg62-turbo-dev libjpeg62-turbo libpng-dev libpng16-16
  libgtest-dev libgmock-dev
)

command -v apt-get >/dev/null || { echo "fetch-debs: needs apt-get (Debian 12)" >&2; exit 2; }
if [ "${DLSCALE_SKIP_APT_UPDATE:-0}" != 1 ]; then
  if [ "$(id -u)" -eq 0 ]; then apt-get update -qq; else sudo apt-get update -qq; fi
fi
mkdir -p "$dest"
rm -f "$dest"/*.deb
(cd "$dest" && apt-get download -qq "${packages[@]}")
n=$(ls "$dest"/*.deb | wc -l)
if [ "$n" -ne "${#packages[@]}" ]; then
  echo "fetch-debs: expected ${#packages[@]} packages, got $n in $dest" >&2
  exit 1
fi
echo "fetch-debs: $n packages ($(du -sh "$dest" | cut -f1)) in $dest"
