#!/usr/bin/env bash
# The main job: set up .venv (idempotent), generate the tiny demo dataset, train the
# bundled demo detector with tools/train.py, and print where everything is.
# Extra arguments go to tools/train.py (e.g. --seed 7, --cfg-options ...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash tools/setup_env.sh
.venv/bin/python tools/make_demo_data.py data/demo
exec .venv/bin/python tools/train.py configs/retinanet_r18_fpn_3e_tinycoco.py \
  --work-dir work_dirs/demo "$@"
