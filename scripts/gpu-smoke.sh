#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds hangtrace and a 1-rank NCCL +
# kernels program (tests/gpu/smoke.cu, nvcc), runs it under hangtrace and
# prints every record, with the device completion of each launch and
# collective (PENDING, then COMPLETE with its time), then the same under
# blocking-launch mode. Says so and stops when there is no GPU.
#   scripts/gpu-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA=${CUDA_HOME:-/usr/local/cuda}
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-smoke: no NVIDIA GPU here (nvidia-smi finds none): nothing to run." >&2
  echo "gpu-smoke: the wrappers are tested without one by build/tests/test_gpu (fakes in tests/fakes)." >&2
  exit 2
fi
nvidia-smi -L
[ -x "$CUDA/bin/nvcc" ] || { echo "gpu-smoke: no nvcc in $CUDA/bin (set CUDA_HOME)" >&2; exit 1; }
[ -x build/bin/hangtrace ] || scripts/setup.sh
echo "gpu-smoke: compiling tests/gpu/smoke.cu"
"$CUDA/bin/nvcc" -O2 -o build/gpu_smoke tests/gpu/smoke.cu -I"$CUDA/include" -L"$CUDA/lib64" -lnccl \
  -Xlinker -rpath -Xlinker "$CUDA/lib64"
dir=$(mktemp -d /tmp/hangtrace-gpu-smoke-XXXXXX)
for mode in off all; do
  echo
  echo "gpu-smoke: running under hangtrace (HANGTRACE_BLOCKING=$mode)"
  rm -rf "$dir"/*
  HANGTRACE_BLOCKING=$mode build/bin/hangtrace run --dir "$dir" --job smoke -- build/gpu_smoke
  build/bin/hangtrace inspect --all "$dir"/smoke/*.htrace
  pending=$(build/bin/hangtrace inspect --all "$dir"/smoke/*.htrace | grep -c ' PENDING ' || true)
  complete=$(build/bin/hangtrace inspect --all "$dir"/smoke/*.htrace | grep -c ' COMPLETE ' || true)
  echo "gpu-smoke: $pending operations tracked on the device, $complete completed"
done
echo "gpu-smoke: traces kept in $dir"
