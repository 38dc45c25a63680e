#!/usr/bin/env bash
# Create (or refresh) mmrepro's own test environments:
#   bash tools/setup_env.sh [current|floor|all]      (default: current)
#
# current: torch 2.13 (CPU wheel), numpy 2, triton 3.7.1 -> linked as .venv
# floor:   torch 2.1.2 (PyPI wheel, runs on CPU), numpy 1.26, triton 2.1.0 -> .venv-floor
# Both: mmengine 0.10.7, mmcv 2.1.0 built from source with its ops, mmdet 3.3.0.
# Pins: requirements/stack-<name>.txt (for these environments only).
#
# The environments live outside the checkout, in $MMREPRO_ENV_HOME (default
# ~/.cache/mmrepro), so a new clone reuses them; .venv and .venv-floor are links.
# Idempotent: each step checks what is installed and skips itself. mmcv is built once
# per stack into $MMREPRO_ENV_HOME/wheels/<stack>/ (no build isolation, no pip cache:
# pip's cache would hand one torch's build to the other).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
home="${MMREPRO_ENV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/mmrepro}"
py="${PYTHON:-python3.11}"

case "${1:-current}" in
  current|floor) stacks=("${1:-current}") ;;
  all) stacks=(current floor) ;;
  *) echo "setup_env.sh: stack '$1' unknown; expected current, floor or all" >&2; exit 2 ;;
esac

setup_stack() {
  local stack=$1 pins="$root/requirements/stack-$1.txt" env="$home/envs/$1"
  local link="$root/.venv" wheels="$home/wheels/$1"
  [ "$stack" = floor ] && link="$root/.venv-floor"
  # A checkout whose .venv is a real directory (older set-ups) keeps using it.
  [ -d "$link" ] && [ ! -L "$link" ] && env="$link"
  local vpy="$env/bin/python"
  pin() { grep -E "^$1[=<>]" "$pins" | head -n1; }
  version_of() { (cd / && "$vpy" -c "import importlib.metadata as m; print(m.version('$1'))") \
                   2>/dev/null || true; }
  have() { [ "$(version_of "$1")" = "$2" ] || [ "$(version_of "$1")" = "$2+cpu" ]; }
  want() { pin "$1" | sed -E 's/^[^=]*==//'; }
  local pip=("$vpy" -m pip --disable-pip-version-check -q)

  if [ ! -x "$vpy" ]; then
    echo "[setup:$stack] creating $env with $($py --version)"
    mkdir -p "$home/envs"
    "$py" -m venv "$env"
  fi
  [ "$env" = "$link" ] || ln -sfn "$env" "$link"

  # 1. torch, numpy, mmengine. Pinning torch exactly keeps pip from replacing it.
  #    The floor's torch brings its CUDA libraries (~4.7 GB): no pip cache copy of them.
  have torch "$(want torch)" || { echo "[setup:$stack] installing $(pin torch)"; \
    "${pip[@]}" install --no-cache-dir "$(pin torch)"; }
  have mmengine "$(want mmengine)" || { echo "[setup:$stack] installing $(pin mmengine)"; \
    "${pip[@]}" install -c "$pins" "$(pin mmengine)" "$(pin numpy)"; }

  # 2. mmcv with its C++ ops, built against this stack's torch, once per stack.
  if ! have mmcv "$(want mmcv)" || ! "$vpy" -c "import mmcv.ops" 2>/dev/null; then
    if ! ls "$wheels"/mmcv-*.whl >/dev/null 2>&1; then
      "${pip[@]}" install "setuptools<70" wheel ninja  # what mmcv 2.1.0's setup.py needs
      echo "[setup:$stack] building $(pin mmcv) with ops (first time: ~11 min on 2 cores)"
      mkdir -p "$wheels"
      MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-2}" FORCE_CUDA=0 "${pip[@]}" wheel \
        --no-build-isolation --no-deps --no-cache-dir -w "$wheels" "$(pin mmcv)"
    fi
    "${pip[@]}" install -c "$pins" "$wheels"/mmcv-*.whl
  fi

  # (albumentations' opencv-python-headless is left out on purpose: see step 3.)
  local broken
  broken=$("${pip[@]}" check 2>&1 | grep -v -e opencv-python-headless -e '^No broken' || true)
  "$vpy" -c "import pkg_resources" 2>/dev/null && [ -z "$broken" ] || \
    "${pip[@]}" install -c "$pins" "$(pin setuptools)" wheel

  # 3. mmdet, test tools; the current stack also tests MMSegmentation.
  have mmdet "$(want mmdet)" || { echo "[setup:$stack] installing $(pin mmdet)"; \
    "${pip[@]}" install -c "$pins" "$(pin mmdet)"; }
  if [ "$stack" = current ]; then
    have mmsegmentation "$(want mmsegmentation)" && "$vpy" -c "import ftfy, regex" \
      2>/dev/null || { echo "[setup:$stack] installing $(pin mmsegmentation)"; \
      "${pip[@]}" install -c "$pins" "$(pin mmsegmentation)" "$(pin ftfy)" "$(pin regex)"; }
    "$vpy" -c "import ruff" 2>/dev/null || "${pip[@]}" install -c "$pins" ruff
  fi
  "$vpy" -c "import pytest, xdist" 2>/dev/null || "${pip[@]}" install -c "$pins" pytest \
    "$(pin pytest-xdist)"
  # albumentations, as MMDetection's Albu transform uses it: 2.x on the current stack, a
  # 1.x on the floor. Without its opencv-python-headless (mmcv's opencv-python gives the
  # same cv2; both in one environment overwrite each other's files), so its other
  # dependencies are named here.
  local albu=("$(pin albumentations)" "$(pin albucore)") albu_deps=(pydantic stringzilla simsimd)
  if [ "$stack" = floor ]; then
    albu=("$(pin albumentations)" "$(pin qudida)")
    albu_deps=("$(pin scikit-image)" "$(pin scikit-learn)")
  fi
  have albumentations "$(want albumentations)" || { echo "[setup:$stack] installing ${albu[*]}"
    "${pip[@]}" uninstall -y -q albumentations albucore 2>/dev/null || true
    "${pip[@]}" install --no-deps "${albu[@]}" && "${pip[@]}" install -c "$pins" "${albu_deps[@]}"; }
  # Triton: the CUDA kernels' tests run on CPU through its interpreter (the CPU wheel
  # of torch does not pull it in; the floor's torch pins its own).
  have triton "$(want triton)" || { echo "[setup:$stack] installing $(pin triton)"; \
    "${pip[@]}" install --no-deps "$(pin triton)"; }

  # 4. No mmrepro in the environment: the tests and tools use this checkout (its
  #    configs resolve through mmrepro/.mim/configs), and tests/e2e/test_install.py
  #    installs the wheel into an environment of its own.
  if [ -n "$(version_of mmrepro)" ]; then
    echo "[setup:$stack] removing the installed mmrepro (the checkout is used)"
    "${pip[@]}" uninstall -y mmrepro
  fi
  write_console_scripts "$env"
  echo "[setup:$stack] ready: $link -> $env"
}

# README's console scripts (setup.cfg's), running this checkout's mmrepro through
# PYTHONPATH: the environment gets no mmrepro distribution (see step 4), and a checkout
# that runs this script takes the scripts over.
write_console_scripts() {
  local env=$1 name target
  while read -r name target; do
    cat > "$env/bin/$name" <<SCRIPT
#!/bin/sh
# $name for the mmrepro checkout $root (written by its tools/setup_env.sh).
PYTHONPATH="$root\${PYTHONPATH:+:\$PYTHONPATH}" exec "$env/bin/python" -c \\
  'import sys; sys.argv[0] = "$name"; from ${target%%:*} import ${target##*:}; sys.exit(${target##*:}())' "\$@"
SCRIPT
    chmod +x "$env/bin/$name"
  done < <(sed -n '/^console_scripts =/,/^$/p' "$root/setup.cfg" | sed -n 's/^ *\(mmrepro-[a-z-]*\) = \(.*\)$/\1 \2/p')
}

for stack in "${stacks[@]}"; do setup_stack "$stack"; done
