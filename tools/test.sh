#!/usr/bin/env bash
# The test command: set up .venv (idempotent), then run the suite.
# Extra arguments go to pytest (e.g. -m "not slow" for the quick subset).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash tools/setup_env.sh
exec .venv/bin/python -m pytest "$@"
