#!/usr/bin/env bash
# The test command: set up the test environments (idempotent), then run
#   - the current stack (torch 2.13, .venv): the whole suite;
#   - the floor stack (torch 2.1.2, .venv-floor): the quick subset plus the tests
#     marked `floor` (real RetinaNet: rerun, num_workers; RetinaNet and Faster R-CNN:
#     mid-epoch resume; kill + resume, 2 ranks, MMDetection's own tools/train.py,
#     pip install);
#   - the yolo stack (the floor's packages under mmcv 2.0.1, MMYOLO 0.6.0, .venv-yolo):
#     MMYOLO's tests and the environment's.
# Tests marked `full` (second proofs and sweeps: the support matrix's zoo, each
# codebase's every layout) run only with TIER=full; CI runs the default tier.
# Extra arguments go to pytest on every stack (a -m given here replaces the selection).
# STACKS="current" (or "floor", "yolo", "current floor") runs those stacks only.
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
stacks=${STACKS:-current floor yolo}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
workers=()
[ "${TEST_WORKERS:-2}" != 0 ] && workers=(-n "${TEST_WORKERS:-2}" --dist loadfile)
#: What the yolo stack runs: MMYOLO's tests and the environment's own.
YOLO_TESTS=(tests/e2e/test_codebases_mmyolo.py tests/unit/test_environment.py)
status=0
for stack in $stacks; do
  bash tools/setup_env.sh "$stack" || exit $?
done
for stack in $stacks; do
  case $stack in
    current) py=.venv/bin/python; select=(-m "not full") ;;
    floor) py=.venv-floor/bin/python; select=(-m "(not slow or floor) and not full") ;;
    yolo) py=.venv-yolo/bin/python; select=(-m "not full" "${YOLO_TESTS[@]}") ;;
  esac
  [ "${TIER:-}" = full ] && case $stack in
    current) select=() ;;
    floor) select=(-m "not slow or floor") ;;
    yolo) select=("${YOLO_TESTS[@]}") ;;
  esac
  echo "== $stack stack: $("$py" -c 'import torch, numpy; print(f"torch {torch.__version__}, numpy {numpy.__version__}")') =="
  "$py" -m pytest "${workers[@]}" "${select[@]}" "$@" || status=$?
done
exit $status
