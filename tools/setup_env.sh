#!/usr/bin/env bash
# Create (or refresh) the project's environment in .venv/ at the repository root.
#
# Idempotent: every step checks what is already installed and skips itself, so a
# second run takes seconds. The stack is pinned in requirements/constraints.txt.
# mmcv 2.1.0 has no wheel for torch 2.13, so it is built from source with its ops
# (CPU only here); pip caches the built wheel, so a rebuild on the same machine is fast.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
constraints="$root/requirements/constraints.txt"
venv="$root/.venv"
py="${PYTHON:-python3.11}"

if [ ! -x "$venv/bin/python" ]; then
  echo "[setup] creating $venv with $($py --version)"
  "$py" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check -q)
pin() { grep -E "^$1[=<>]" "$constraints" | head -n1; }
have() {  # have NAME VERSION: is exactly this version installed?
  [ "$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$1'))" \
        2>/dev/null || true)" = "$2" ]
}

# 1. torch (CPU wheel from local disk where pip finds it) and mmengine. Pinning
#    torch exactly keeps pip from pulling a multi-GB CUDA build.
if ! have torch 2.13.0 && ! have torch 2.13.0+cpu; then
  echo "[setup] installing $(pin torch)"
  "${pip[@]}" install "$(pin torch)"
fi
have mmengine 0.10.7 || { echo "[setup] installing $(pin mmengine)"; \
  "${pip[@]}" install -c "$constraints" "$(pin mmengine)" "$(pin numpy)"; }

# 2. Build tools for mmcv's setup.py (needs pkg_resources, hence setuptools<70).
"$venv/bin/python" -c "import pkg_resources, wheel, ninja" 2>/dev/null || {
  echo "[setup] installing mmcv build tools"
  "${pip[@]}" install "setuptools<70" wheel ninja; }

# 3. mmcv with its C++ ops, built against the installed torch (no build isolation,
#    which would pull another torch). About 11 minutes on 2 cores the first time.
if ! have mmcv 2.1.0 || ! "$venv/bin/python" -c "import mmcv.ops" 2>/dev/null; then
  echo "[setup] building $(pin mmcv) with ops (first time: ~11 min on 2 cores)"
  MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-2}" FORCE_CUDA=0 \
    "${pip[@]}" install --no-build-isolation -c "$constraints" "$(pin mmcv)"
fi

# 4. mmdet, mmsegmentation (another MMEngine codebase, in the suite) and the test tools.
have mmdet 3.3.0 || { echo "[setup] installing $(pin mmdet)"; \
  "${pip[@]}" install -c "$constraints" "$(pin mmdet)"; }
have mmsegmentation 1.2.2 && "$venv/bin/python" -c "import ftfy, regex" 2>/dev/null || {
  echo "[setup] installing $(pin mmsegmentation)"
  "${pip[@]}" install -c "$constraints" "$(pin mmsegmentation)" "$(pin ftfy)" "$(pin regex)"; }
"$venv/bin/python" -c "import pytest, ruff" 2>/dev/null || \
  "${pip[@]}" install -c "$constraints" pytest ruff
# Triton: the CUDA RoIAlign backward's kernels, run by the tests on CPU through its
# interpreter (CUDA builds of torch ship it; the CPU wheel does not pull it in).
have triton 3.7.1 || { echo "[setup] installing $(pin triton)"; \
  "${pip[@]}" install --no-deps "$(pin triton)"; }

# 5. mmrepro itself, editable.
# (checked through the installed metadata: importing from the repo root would hide it)
"$venv/bin/python" -c "import importlib.metadata as m; m.version('mmrepro')" 2>/dev/null || {
  echo "[setup] installing mmrepro (editable)"
  "${pip[@]}" install --no-build-isolation --no-deps -e "$root"; }

echo "[setup] environment ready: $venv"
