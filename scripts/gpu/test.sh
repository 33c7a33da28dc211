#!/usr/bin/env bash
# Run on the GPU machine after `scripts/gpu/build.sh --tests`: the tests
# labelled `gpu` (tests/gpu/gpu_test.cpp). Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
[ -x "$BUILD_DIR/tests/dlscale_gpu_tests" ] || {
  echo "test.sh: $BUILD_DIR/tests/dlscale_gpu_tests is missing: run scripts/gpu/build.sh --tests" >&2
  exit 2
}
nvidia-smi -L || true
ctest --test-dir "$BUILD_DIR" -L gpu --output-on-failure "$@"
