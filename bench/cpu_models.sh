#!/usr/bin/env bash
# Does a claim of bit-equal (or rtol-close) weights hold on CPUs other than
# this one? Runs two trainings of 2 workers (mpirun, Gloo) under QEMU's user
# mode as other x86-64 CPU models, and natively, and prints how far the
# second run's weights are from the first's on each (closeness: the largest
# |a - b| / (rtol / 100 + rtol |b|), as tests/launch/weights_util.h; <= 1
# holds at rtol).
#
#   bench/cpu_models.sh [--rtol R] [--models "host Haswell EPYC-Rome ..."] [--a "FLAGS"] [--b "FLAGS"]
#                       [--np N] [--common "train ..."]
#
# Default: resnet18 (16 px, 3 steps, momentum) with allreduce against
# --strategy zero --zero-stage 3 --zero-unit block, the pair that issue 41
# saw apart on an AVX2-only AMD EPYC; rtol 1e-5; CPU models host (no QEMU),
# Haswell (AVX2, no AVX-512, Intel) and EPYC-Rome (AVX2, AMD's cache leaves).
# QEMU 7.2's TCG runs AVX2 and FMA, and LibTorch, oneDNN and OpenBLAS pick
# their kernels from the CPUID it reports: the host's and a model's weights
# differ (other kernels ran), while a and b are compared on the same model.
# Needs qemu-user (Debian's package; not installed by scripts/setup.sh),
# mpirun and /usr/bin/python3 with torch (`make setup`). A run takes about
# 20 s under QEMU on one core.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
torch_bin=${DLSCALE_TORCH:-$root/build/dlscale-torch}
rtol=1e-5
models="host Haswell EPYC-Rome"
common="train --model resnet18 --image-size 16 --classes 10 --threads 1 --steps 3 --warmup 1 --display-every 0
  --synthetic-batches 2 --global-batch 24 --optimizer momentum --lr 0.01 --backend gloo --timeout 600"
a="--strategy allreduce"
b="--strategy zero --zero-stage 3 --zero-unit block"
np=2
while [ $# -gt 0 ]; do
  case $1 in
    --rtol) rtol=${2:?}; shift 2 ;;
    --models) models=${2:?}; shift 2 ;;
    --a) a=${2:?}; shift 2 ;;
    --b) b=${2:?}; shift 2 ;;
    --np) np=${2:?}; shift 2 ;;
    --common) common="${2:?} --backend gloo --timeout 600"; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "cpu_models: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$torch_bin" ] || { echo "cpu_models: $torch_bin is missing (make build)" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "cpu_models: mpirun is missing (make setup)" >&2; exit 2; }
if [ "$models" != host ] && ! command -v qemu-x86_64 >/dev/null; then
  echo "cpu_models: qemu-x86_64 is missing (apt-get install qemu-user)" >&2; exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
port=$((29700 + $$ % 200))

# train NAME MODEL FLAGS: $np workers, weights to $work/NAME.pt
train() {
  local name=$1 model=$2 flags=$3 wrap=()
  [ "$model" = host ] || wrap=(qemu-x86_64 -cpu "$model")
  port=$((port + 1))
  # shellcheck disable=SC2086
  if ! mpirun --allow-run-as-root --oversubscribe -np "$np" -x OPENBLAS_CORETYPE "${wrap[@]}" "$torch_bin" $common \
       --master-addr 127.0.0.1 --master-port "$port" $flags --save-weights "$work/$name.pt" \
       > "$work/$name.log" 2>&1; then
    echo "cpu_models: the run '$flags' on $model failed:" >&2
    grep -v 'TCG doesn.t support' "$work/$name.log" | tail -5 >&2
    exit 1
  fi
}

closeness() {
  /usr/bin/python3 - "$1" "$2" "$rtol" <<'EOF'
import sys, torch
def load(p):
    m = torch.jit.load(p)
    return [t for _, t in sorted(m.named_parameters())]
a, b, rtol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
print(f"{max(((x - y).abs() / (rtol / 100 + rtol * y.abs())).max().item() for x, y in zip(a, b)):.3g}")
EOF
}

printf '%-12s %-10s %s\n' "cpu model" "b vs a" "a vs host's a"
for model in $models; do
  train "a-$model" "$model" "$a"
  train "b-$model" "$model" "$b"
  against_host=-
  [ "$model" != host ] && [ -f "$work/a-host.pt" ] && against_host=$(closeness "$work/a-$model.pt" "$work/a-host.pt")
  printf '%-12s %-10s %s\n' "$model" "$(closeness "$work/b-$model.pt" "$work/a-$model.pt")" "$against_host"
done
echo "(closeness at rtol $rtol: <= 1 is within it; 0 is bit-equal)"
