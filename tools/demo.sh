#!/usr/bin/env bash
# The main job: set up .venv (idempotent), generate the tiny demo dataset, train the
# bundled demo detector with tools/train.py, print where everything is, then verify
# the run: train its first optimizer steps again from the run's config dump (so options
# given here, e.g. --seed 7, hold there too) and compare them with the run's trace
# (tools/check_repro.py --against), which says it reproduces bit for bit.
# Extra arguments go to tools/train.py (e.g. --seed 7, --cfg-options ...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
config=configs/retinanet_r18_fpn_3e_tinycoco.py
bash tools/setup_env.sh
.venv/bin/python tools/make_demo_data.py data/demo
.venv/bin/python tools/train.py "$config" --work-dir work_dirs/demo "$@"
echo
echo "== verifying the run: its first optimizer steps trained again and compared =="
exec .venv/bin/python tools/check_repro.py "work_dirs/demo/$(basename "$config")" \
  --against work_dirs/demo \
  --work-dir work_dirs/demo_check
