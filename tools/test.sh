#!/usr/bin/env bash
# The test command: set up both test environments (idempotent), then run
#   - the current stack (torch 2.13, .venv): the whole suite;
#   - the floor stack (torch 2.1.2, .venv-floor): the quick subset plus the tests
#     marked `floor` (real RetinaNet / Faster R-CNN: rerun, num_workers, mid-epoch
#     resume, kill + resume, MMDetection's own tools/train.py, pip install).
# Extra arguments go to pytest on both stacks (a -m given here replaces the floor's
# selection). STACKS="current" (or "floor") runs one stack only.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stacks=${STACKS:-current floor}
status=0
for stack in $stacks; do
  bash tools/setup_env.sh "$stack" || exit $?
done
for stack in $stacks; do
  if [ "$stack" = current ]; then py=.venv/bin/python; select=(); else
    py=.venv-floor/bin/python; select=(-m "not slow or floor"); fi
  echo "== $stack stack: $("$py" -c 'import torch, numpy; print(f"torch {torch.__version__}, numpy {numpy.__version__}")') =="
  "$py" -m pytest "${select[@]}" "$@" || status=$?
done
exit $status
