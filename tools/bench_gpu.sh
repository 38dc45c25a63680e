#!/usr/bin/env bash
# The GPU measurements, side by side in one run each, into one results
# file: RoIAlign forward+backward (DeterministicRoIAlign vs mmcv's CUDA op), the
# deformable ops and adaptive pooling vs the originals, and training throughput with
# deterministic mode on vs off (R50-FPN, 1333x800, Faster and Mask R-CNN). The support
# matrix is separate: python3 tools/support_matrix.py (about 10 minutes on one GPU).
#   bash tools/bench_gpu.sh [OUT_FILE]     (default benchmarks/results/gpu_<device>.md)
# Python: $PYTHON, else python3 (an environment with mmcv built with its CUDA ops).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
py="${PYTHON:-python3}"
name="$("$py" -c 'import torch; print(torch.cuda.get_device_name().split()[1].lower())')"
out="${1:-benchmarks/results/gpu_${name}.md}"
{
  echo "# GPU measurements ($(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo '```'
  echo "\$ $py benchmarks/bench_roi_align.py --device cuda --reps 21"
  "$py" benchmarks/bench_roi_align.py --device cuda --reps 21
  echo
  echo "\$ $py benchmarks/bench_deformable.py --reps 21"
  "$py" benchmarks/bench_deformable.py --reps 21
  echo
  echo "\$ $py benchmarks/bench_deterministic.py --device cuda --depth 50 --scale 1333 800" \
       "--models 'Faster R-CNN' 'Mask R-CNN' --rounds 5 --block 6"
  "$py" benchmarks/bench_deterministic.py --device cuda --depth 50 --scale 1333 800 \
        --models 'Faster R-CNN' 'Mask R-CNN' --rounds 5 --block 6
  echo '```'
} 2>&1 | tee "$out"
echo "[bench_gpu] written to $out"
