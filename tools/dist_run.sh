#!/usr/bin/env bash
# What tools/dist_train.sh and tools/dist_test.sh share: launch a tool on NPROC
# processes per node with torchrun, after one check of its arguments and config.
#   bash tools/dist_run.sh PROG TOOL NPROC TOOL_ARGS...
# PROG names the calling script in messages; TOOL is train.py or test.py (in tools/);
# TOOL_ARGS are the tool's own arguments (config first). Python: $PYTHON if set, else
# the first `python` (or `python3`) on PATH; the repository's own test environments are
# never picked silently. Without GPUs the processes use gloo on the CPU. NNODES,
# NODE_RANK, PORT and MASTER_ADDR work as in MMDetection. Bad arguments or config: one
# `error:` line and exit 2, before any process is launched (the tool's --check-config).
set -euo pipefail
PROG=$1
TOOL=$2
GPUS=$3
shift 3
fail() {
  echo "$PROG: error: $*" >&2
  exit 2
}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
if ! [[ "$GPUS" =~ ^[1-9][0-9]*$ ]]; then
  fail "NPROC must be a whole number >= 1 (processes per node), got '$GPUS'"
fi
if ! [[ "$NNODES" =~ ^[1-9][0-9]*$ ]]; then
  fail "NNODES must be a whole number >= 1, got '$NNODES'"
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${PYTHON:-}" ]; then
  chosen="PYTHON=$PYTHON"
else
  PYTHON=$(command -v python || command -v python3 || true)
  chosen="$PYTHON, the first python on PATH"
fi
if [ -z "$PYTHON" ]; then
  fail "no python on PATH; set PYTHON=/path/to/python of an environment with torch"
fi
if ! info=$("$PYTHON" -c "import torch; n = torch.cuda.device_count(); \
print(torch.__version__ + '); ' + (f'{n} CUDA device(s), NCCL' if n else \
'no CUDA device: CPU processes over gloo'))" 2>&1); then
  fail "the python used ($chosen) cannot import torch ($(tail -n 1 <<<"$info"));" \
    "set PYTHON=/path/to/python of an environment with torch and mmdet"
fi
# One check of the arguments and config for the whole world, before any process starts.
PYTHONPATH="$root:${PYTHONPATH:-}" WORLD_SIZE=$((GPUS * NNODES)) \
  "$PYTHON" "$root/tools/$TOOL" "$@" --check-config --launcher pytorch \
  >/dev/null || exit $?
echo "$PROG: $GPUS process(es) with $PYTHON (torch $info" >&2
PYTHONPATH="$root:${PYTHONPATH:-}" \
exec "$PYTHON" -m torch.distributed.run \
    --nnodes="$NNODES" \
    --node_rank="$NODE_RANK" \
    --master_addr="$MASTER_ADDR" \
    --nproc_per_node="$GPUS" \
    --master_port="$PORT" \
    "$root/tools/$TOOL" \
    "$@" \
    --launcher pytorch
