#!/usr/bin/env bash
# The cuda tier: tests marked `cuda` (DeterministicRoIAlign, the deformable and rotated
# ops and adaptive pooling against mmcv's CUDA ops and PyTorch's, and Faster R-CNN /
# RetinaNet trained on the GPU: reruns, resume, num_workers, check_repro, NCCL launchers).
# Needs a GPU; elsewhere those tests skip and say why.
#   bash tools/test_cuda.sh [pytest args]          # e.g. -x, or -m "not slow" (op tests)
# Python: $PYTHON if set, else the first of .venv/bin/python and python3 that sees a GPU.
# It needs mmdet and mmcv built with its CUDA ops in that Python's environment.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-}"
if [ -z "$py" ]; then
  for candidate in .venv/bin/python python3; do
    if "$candidate" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' \
        2>/dev/null; then
      py="$candidate"; break
    fi
  done
fi
if [ -z "$py" ]; then
  echo "tools/test_cuda.sh: no Python here sees a CUDA device; the cuda tier needs a GPU" >&2
  exit 2
fi
echo "[test_cuda] $("$py" -c 'import torch; print(torch.__version__, "CUDA",
  torch.version.cuda, torch.cuda.get_device_name())')"
exec "$py" -m pytest -m cuda tests "$@"
