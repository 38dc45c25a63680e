#!/usr/bin/env bash
# Multi-process training, as MMDetection's tools/dist_train.sh:
#   bash tools/dist_train.sh CONFIG NPROC [tools/train.py args...]
# Without GPUs the processes use gloo on the CPU. NNODES, NODE_RANK, PORT and
# MASTER_ADDR work as in MMDetection.
set -euo pipefail
CONFIG=$1
GPUS=$2
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON=${PYTHON:-python}
[ -x "$root/.venv/bin/python" ] && PYTHON="$root/.venv/bin/python"
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
