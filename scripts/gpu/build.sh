#!/usr/bin/env bash
# Run on the GPU machine (no network needed): unpacks the Debian packages
# that scripts/gpu/fetch-debs.sh downloaded into a private prefix and builds
# dlscale against the CUDA LibTorch of a PyTorch install, with NCCL.
#   bash scripts/gpu/build.sh [--tests] [--jobs N]
# --tests also builds the GPU tests (scripts/gpu/test.sh runs them).
# Environment: PYTHON (the python holding torch; default python3),
# DEBS (default .gpu/debs), PREFIX (default /opt/dlscale-deps),
# BUILD_DIR (default build-gpu). See docs/gpu.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
DEBS=${DEBS:-.gpu/debs}
PREFIX=${PREFIX:-/opt/dlscale-deps}
BUILD_DIR=${BUILD_DIR:-build-gpu}
tests=OFF
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) tests=ON ;;
    --jobs) jobs=$2; shift ;;
    *) echo "build.sh: unknown option '$1' (allowed: --tests, --jobs N)" >&2; exit 2 ;;
  esac
  shift
done

ls "$DEBS"/*.deb >/dev/null 2>&1 || {
  echo "build.sh: no .deb files in $DEBS: run scripts/gpu/fetch-debs.sh on a Debian machine first" >&2
  exit 2
}
torch_cmake=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)') || {
  echo "build.sh: $PYTHON cannot import torch (set PYTHON to the interpreter holding PyTorch)" >&2
  exit 2
}
"$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.version.cuda else 1)' || {
  echo "build.sh: $PYTHON's torch is a CPU build; a CUDA PyTorch is needed" >&2
  exit 2
}

# 1. The Debian packages, unpacked (not installed) into $PREFIX. Their CMake
#    and pkg-config files name /usr; point them at the prefix instead.
mkdir -p "$PREFIX"
for f in "$DEBS"/*.deb; do dpkg-deb -x "$f" "$PREFIX"; done
grep -rlE '"/usr/|^prefix=/usr' "$PREFIX/usr/lib" "$PREFIX/usr/share" 2>/dev/null |
  grep -E '\.cmake$|\.pc$' | while read -r f; do
    sed -i -e "s|\"/usr/|\"$PREFIX/usr/|g" -e "s|^prefix=/usr|prefix=$PREFIX/usr|" "$f"
  done
libdir=$PREFIX/usr/lib/x86_64-linux-gnu

# 2. NCCL: the one PyTorch loads (the nvidia-nccl wheel), else the system's.
nccl_root=$("$PYTHON" -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
[ -n "$nccl_root" ] && [ -f "$nccl_root/include/nccl.h" ] || nccl_root=""

# 3. MPI only when the machine has a development install of it.
mpi=OFF
command -v mpicc >/dev/null && mpi=ON

# The binaries carry an RPATH (not RUNPATH: --disable-new-dtags) to the
# prefix, so libgloo's own dependencies (hiredis) are found there too.
export PKG_CONFIG_PATH=$libdir/pkgconfig:$PREFIX/usr/share/pkgconfig
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -Wno-dev \
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
  -DDLSCALE_LIBTORCH_DIR="$torch_cmake/Torch" \
  -DDLSCALE_NCCL_ROOT="$nccl_root" \
  -DDLSCALE_WITH_MPI=$mpi \
  -DDLSCALE_BUILD_TESTS=$tests \
  -DCMAKE_PREFIX_PATH="$PREFIX/usr;$libdir/cmake;$PREFIX/usr/share/cmake" \
  -DCMAKE_BUILD_RPATH="$libdir;$PREFIX/usr/lib" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags"
targets=(dlscale_cli)
[ "$tests" = ON ] && targets+=(dlscale_gpu_tests)
cmake --build "$BUILD_DIR" -j "$jobs" --target "${targets[@]}"
echo "build.sh: built $BUILD_DIR/dlscale against torch $("$PYTHON" -c 'import torch; print(torch.__version__)')"
