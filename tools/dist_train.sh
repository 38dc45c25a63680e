#!/usr/bin/env bash
# Multi-process training, as MMDetection's tools/dist_train.sh:
#   bash tools/dist_train.sh CONFIG NPROC [tools/train.py args...]
# Python: $PYTHON if set, else the first `python` (or `python3`) on PATH; the
# repository's own test environments are never picked silently. Without GPUs the
# processes use gloo on the CPU. NNODES, NODE_RANK, PORT and MASTER_ADDR work as in
# MMDetection.
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON=${PYTHON:-$(command -v python || command -v python3 || true)}
if [ -z "$PYTHON" ]; then
  echo "dist_train.sh: no python on PATH; set PYTHON=/path/to/python" >&2
  exit 2
fi
devices=$("$PYTHON" -c "import torch; n = torch.cuda.device_count(); \
print(f'{n} CUDA device(s), NCCL' if n else 'no CUDA device: CPU processes over gloo')")
echo "dist_train.sh: $GPUS process(es) with $PYTHON (torch $("$PYTHON" -c \
  'import torch; print(torch.__version__)')); $devices" >&2
PYTHONPATH="$root:${PYTHONPATH:-}" \
exec "$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$root/tools/train.py" \
    "$CONFIG" \
    --launcher pytorch "${@:3}"
