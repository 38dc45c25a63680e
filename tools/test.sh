#!/usr/bin/env bash
# The test command: set up both test environments (idempotent), then run
#   - the current stack (torch 2.13, .venv): the whole suite;
#   - the floor stack (torch 2.1.2, .venv-floor): the quick subset plus the tests
#     marked `floor` (real RetinaNet: rerun, num_workers; RetinaNet and Faster R-CNN:
#     mid-epoch resume; kill + resume, 2 ranks, MMDetection's own tools/train.py,
#     pip install).
# Tests marked `full` (second proofs and sweeps: the support matrix's zoo, each
# codebase's every layout) run only with TIER=full; CI runs the default tier.
# Extra arguments go to pytest on both stacks (a -m given here replaces the selection).
# STACKS="current" (or "floor") runs one stack only.
#
# Each stack runs two pytest-xdist workers (TEST_WORKERS=N for another number, 0 for
# none; each test file on one worker: --dist loadfile, in pytest-xdist's order), and
# one intra-op thread per process
# (OMP_NUM_THREADS=1 unless set): two trainings at once then share the 2 cores without
# oversubscribing them. The datasets and the cached runs are made once per test run and
# shared by the workers (tests/conftest.py).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stacks=${STACKS:-current floor}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
workers=()
[ "${TEST_WORKERS:-2}" != 0 ] && workers=(-n "${TEST_WORKERS:-2}" --dist loadfile)
status=0
for stack in $stacks; do
  bash tools/setup_env.sh "$stack" || exit $?
done
for stack in $stacks; do
  if [ "$stack" = current ]; then py=.venv/bin/python; select=(-m "not full"); else
    py=.venv-floor/bin/python; select=(-m "(not slow or floor) and not full"); fi
  [ "${TIER:-}" = full ] && { [ "$stack" = current ] && select=() || \
    select=(-m "not slow or floor"); }
  echo "== $stack stack: $("$py" -c 'import torch, numpy; print(f"torch {torch.__version__}, numpy {numpy.__version__}")') =="
  "$py" -m pytest "${workers[@]}" "${select[@]}" "$@" || status=$?
done
exit $status
