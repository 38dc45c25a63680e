#!/usr/bin/env bash
# Multi-process testing, as MMDetection's tools/dist_test.sh:
#   bash tools/dist_test.sh CONFIG CHECKPOINT NPROC [tools/test.py args...]
# Python, devices, NNODES, NODE_RANK, PORT, MASTER_ADDR and the one check before any
# process is launched: see tools/dist_run.sh.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "dist_test.sh: error: expected CONFIG CHECKPOINT NPROC [tools/test.py args], got" \
    "$# argument(s); e.g. bash tools/dist_test.sh configs/my_config.py epoch_12.pth 2" >&2
  exit 2
fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/dist_run.sh" dist_test.sh test.py "$3" "$1" "$2" \
  "${@:4}"
