#!/usr/bin/env bash
# Installs every build, test and peer-benchmark dependency of dlscale from
# Debian's packages. Idempotent: prints one line and does nothing when all
# packages are already present. Must run as root (or through sudo).
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-pthread
  libgloo-dev libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev libfmt-dev libyaml-cpp-dev libsqlite3-dev
  libgtest-dev libgmock-dev
  zlib1g-dev libjpeg62-turbo-dev libpng-dev libre2-dev dataset-fashion-mnist
  clang libclang-rt-14-dev
  python3-torch python3-torchvision jq
  iproute2
  slurmctld slurmd slurm-client munge
)

# `--with-chromium` adds Debian's chromium for scripts/check_html.sh (the
# HTML report render check); the build and the tests do not need it.
if [ "${1:-}" = "--with-chromium" ]; then
  packages+=(chromium)
elif [ -n "${1:-}" ]; then
  echo "setup: unknown option '$1' (allowed: --with-chromium)" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: must run as root (apt-get install)" >&2; exit 2; }
  sudo_cmd=(sudo)
fi

echo "setup: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Slurm's and munge's packages would start their daemons machine-wide;
# dlscale runs its own per cluster (docs/slurm.md). A policy-rc.d that
# denies starting services keeps them stopped, where none is in place.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod 755 "$policy"
  own_policy=1
fi
cleanup() { if [ "$own_policy" = 1 ]; then "${sudo_cmd[@]}" rm -f "$policy"; fi; }
trap cleanup EXIT
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
