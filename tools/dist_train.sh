#!/usr/bin/env bash
# Multi-process training, as MMDetection's tools/dist_train.sh:
#   bash tools/dist_train.sh CONFIG NPROC [tools/train.py args...]
# Python, devices, NNODES, NODE_RANK, PORT, MASTER_ADDR and the one check before any
# process is launched: see tools/dist_run.sh.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "dist_train.sh: error: expected CONFIG NPROC [tools/train.py args], got $#" \
    "argument(s); e.g. bash tools/dist_train.sh configs/my_config.py 2" >&2
  exit 2
fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/dist_run.sh" dist_train.sh train.py "$2" "$1" \
  "${@:3}"
