#!/usr/bin/env bash
# One-GPU check of mt's GPU path, about 10 minutes (its first five tests took 500 s on an
# H200): runs tests/test_gpu.py (what it checks is listed there) and prints its table of
# measurements.
#   scripts/gpu_check.sh [MULTI30K_DIR] [pytest options]      (default ../shared/data/multi30k)
# Fails without a CUDA device: there the tests would only skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export MT_GPU_DATA=${1:-../shared/data/multi30k}
export PYTHONUNBUFFERED=1
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || {
  echo "gpu_check FAILED: torch sees no CUDA device" \
       "(torch $(python -c 'import torch; print(torch.__version__)'))" >&2
  exit 1
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
python -m pytest -m gpu tests/test_gpu.py -rs "${@:2}"
