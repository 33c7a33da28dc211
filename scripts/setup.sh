#!/usr/bin/env bash
# Installs dlscale's dependencies from Debian's packages, by profile:
#
#   scripts/setup.sh run     what `make run` needs: the build and the runtime
#                            (LibTorch, Gloo, MPI, the data and network tools)
#   scripts/setup.sh test    run's, and the tests' and peers' tools: GoogleTest,
#                            clang for the fuzzers, clang-format for the format
#                            check, PyTorch for bench/, Slurm
#                            for the cluster drills (the default)
#   --with-chromium          adds Debian's chromium for scripts/check_html.sh
#                            (the HTML report render check)
#
# Idempotent: prints one line and does nothing when all packages are already
# present. Must run as root (or through sudo).
set -euo pipefail

run_packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-pthread
  libgloo-dev libopenmpi-dev openmpi-bin
  libcli11-dev nlohmann-json3-dev libfmt-dev libyaml-cpp-dev libsqlite3-dev
  zlib1g-dev libjpeg62-turbo-dev libpng-dev libre2-dev dataset-fashion-mnist
  iproute2
)
test_packages=(
  libgtest-dev libgmock-dev
  clang libclang-rt-14-dev clang-format-14
  python3-torch python3-torchvision jq
  slurmctld slurmd slurm-client munge
)

profile=test
packages=()
for arg in "$@"; do
  case $arg in
    run | test) profile=$arg ;;
    --with-chromium) packages+=(chromium) ;;
    *)
      echo "setup: unknown option '$arg' (allowed: run, test, --with-chromium)" >&2
      exit 2
      ;;
  esac
done
packages+=("${run_packages[@]}")
if [ "$profile" = test ]; then packages+=("${test_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages of profile '$profile' already installed"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: must run as root (apt-get install)" >&2; exit 2; }
  sudo_cmd=(sudo)
fi

echo "setup: installing ${#missing[@]} package(s) of profile '$profile': ${missing[*]}"
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
