#!/usr/bin/env bash
# Create (or refresh) mmrepro's own test environments:
#   bash tools/setup_env.sh [current|floor|yolo|all]      (default: current)
#
# current: torch 2.13 (CPU wheel), numpy 2, triton 3.7.1 -> linked as .venv
# floor:   torch 2.1.2 (PyPI wheel, runs on CPU), numpy 1.26, triton 2.1.0 -> .venv-floor
# Both: mmengine 0.10.7, mmcv 2.1.0 built from source with its ops, mmdet 3.3.0, and
# mmrepro itself, linked from the checkout; current also: mmpretrain 1.2.0, mmpose 1.3.2,
# mmrotate-dev 1.0.1.
# yolo:    the floor's packages (a .pth line) under its own mmcv 2.0.1 (built against the
#          floor's torch) and MMYOLO 0.6.0, which refuses mmcv 2.1 -> .venv-yolo (sets up
#          the floor first where it is not there).
# Pins: requirements/stack-<name>.txt (for these environments only).
#
# The environments live outside the checkout, in $MMREPRO_ENV_HOME (default
# ~/.cache/mmrepro), so a new clone reuses them; .venv and .venv-floor are links.
# Idempotent: each step checks what is installed and skips itself (a rerun on a ready
# environment prints only its ready line). mmcv is built once per stack into
# $MMREPRO_ENV_HOME/wheels/<stack>/ (no build isolation, no pip cache: pip's cache would
# hand one torch's build to the other). "ready" means `pip check` finds every
# requirement of every installed package met.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
home="${MMREPRO_ENV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/mmrepro}"
py="${PYTHON:-python3.11}"

case "${1:-current}" in
  current|floor) stacks=("${1:-current}") ;;
  yolo) stacks=(yolo) ;;
  all) stacks=(current floor yolo) ;;
  *) echo "setup_env.sh: stack '$1' unknown; expected current, floor, yolo or all" >&2
     exit 2 ;;
esac

pin() { grep -E "^$1[=<>]" "$pins" | head -n1; }
# Whether every requirement given ("torch==2.13.0", "setuptools>=77,<80", "ruff") is
# installed in $vpy's environment; "==2.13.0" takes 2.13.0+cpu too.
satisfied() { (cd / && "$vpy" - "$@" 2>/dev/null <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
from pip._vendor.packaging.requirements import Requirement
def met(text):
    req = Requirement(text)
    try:
        return req.specifier.contains(version(req.name), prereleases=True)
    except PackageNotFoundError:
        return False
sys.exit(0 if all(met(text) for text in sys.argv[1:]) else 1)
PY
); }

setup_stack() {
  local stack=$1 pins="$root/requirements/stack-$1.txt" env="$home/envs/$1"
  local link="$root/.venv" wheels="$home/wheels/$1"
  [ "$stack" = floor ] && link="$root/.venv-floor"
  # A checkout whose .venv is a real directory (older set-ups) keeps using it.
  [ -d "$link" ] && [ ! -L "$link" ] && env="$link"
  local vpy="$env/bin/python"
  # Whether a distribution given ("albumentations==2.0.8") requires opencv-python-headless.
  wants_headless() { (cd / && "$vpy" - "$@" 2>/dev/null <<'PY'
import re
import sys
from importlib.metadata import requires
names = [re.split('[=<>]', text)[0] for text in sys.argv[1:]]
sys.exit(0 if any(re.match(r'opencv-python-headless\b', requirement)
                  for name in names for requirement in requires(name) or []) else 1)
PY
  ); }
  local pip=("$vpy" -m pip --disable-pip-version-check -q)

  if [ ! -x "$vpy" ]; then
    echo "[setup:$stack] creating $env with $($py --version)"
    mkdir -p "$home/envs"
    "$py" -m venv "$env"
  fi
  [ "$env" = "$link" ] || ln -sfn "$env" "$link"

  # 1. torch, numpy, mmengine, and the setuptools torch requires. Pinning torch exactly
  #    keeps pip from replacing it. The floor's torch brings its CUDA libraries
  #    (~4.7 GB): no pip cache copy of them.
  satisfied "$(pin torch)" || { echo "[setup:$stack] installing $(pin torch)"; \
    "${pip[@]}" install --no-cache-dir "$(pin torch)"; }
  satisfied "$(pin mmengine)" || { echo "[setup:$stack] installing $(pin mmengine)"; \
    "${pip[@]}" install -c "$pins" "$(pin mmengine)" "$(pin numpy)"; }
  satisfied "$(pin setuptools)" wheel ninja || "${pip[@]}" install -c "$pins" \
    "$(pin setuptools)" wheel ninja

  # 2. mmcv with its C++ ops, built against this stack's torch (build_mmcv, below).
  if ! satisfied "$(pin mmcv)" || ! "$vpy" -c "import mmcv.ops" 2>/dev/null; then
    build_mmcv
    "${pip[@]}" install -c "$pins" "$mmcv_wheel"*.whl
  fi

  # 3. mmdet, test tools; the current stack also tests MMSegmentation.
  satisfied "$(pin mmdet)" || { echo "[setup:$stack] installing $(pin mmdet)"; \
    "${pip[@]}" install -c "$pins" "$(pin mmdet)"; }
  if [ "$stack" = current ]; then
    satisfied "$(pin mmsegmentation)" "$(pin ftfy)" "$(pin regex)" || { \
      echo "[setup:$stack] installing $(pin mmsegmentation)"; \
      "${pip[@]}" install -c "$pins" "$(pin mmsegmentation)" "$(pin ftfy)" "$(pin regex)"; }
    satisfied ruff || "${pip[@]}" install -c "$pins" ruff
  fi
  satisfied "$(pin pytest)" "$(pin pytest-xdist)" "$(pin pytest-timeout)" || \
    "${pip[@]}" install -c "$pins" "$(pin pytest)" "$(pin pytest-xdist)" "$(pin pytest-timeout)"
  # albumentations, as MMDetection's Albu transform uses it: 2.x on the current stack, a
  # 1.x on the floor. Their wheels require opencv-python-headless, whose cv2 would
  # overwrite the files of the cv2 mmengine's opencv-python brings. Built here from their
  # sources instead (no build isolation), they require the OpenCV that is installed, as
  # their setup.py chooses.
  local albu=("$(pin albumentations)" "$(pin albucore)")
  [ "$stack" = floor ] && albu=("$(pin albumentations)" "$(pin qudida)")
  satisfied "${albu[@]}" && ! wants_headless "${albu[@]}" || {
    echo "[setup:$stack] installing ${albu[*]} (from source: they then use opencv-python)"
    "${pip[@]}" install --force-reinstall --no-deps --no-build-isolation --no-cache-dir \
      --no-binary "$(IFS=,; echo "${albu[*]%%=*}")" "${albu[@]}"
    "${pip[@]}" install -c "$pins" "${albu[@]}"; }  # their other requirements
  # Triton: the CUDA kernels' tests run on CPU through its interpreter (the CPU wheel
  # of torch does not pull it in; the floor's torch pins its own).
  satisfied "$(pin triton)" || { echo "[setup:$stack] installing $(pin triton)"; \
    "${pip[@]}" install --no-deps "$(pin triton)"; }

  # 4. The current stack: the OpenMMLab codebases teams train with, each by its own
  #    tools/train.py (docs/install.md): mmpretrain, mmpose and mmrotate (mmrotate-dev).
  #    MMYOLO has a stack of its own (setup_yolo, below).
  #    First what PyPI serves awkwardly:
  #    - torchvision, the release this torch pins. Its wheel is a CUDA build: beside the
  #      CPU torch its C ops do not load, and `import torchvision` then fails unless
  #      tools/env/torchvision_without_ops.py (copied into site-packages, run by a .pth
  #      line) defines the two operator schemas its fake kernels need;
  #    - chumpy (mmpose's): a source distribution whose setup.py imports pip, so it is
  #      built without build isolation;
  #    - xtcocotools (mmpose's): its wheel is built against numpy 1.x and fails to import
  #      on numpy 2 ("numpy.dtype size changed"): it is built from its source.
  if [ "$stack" = current ]; then
    local site hook=$root/tools/env/torchvision_without_ops.py
    site=$(echo "$env"/lib/python3*/site-packages)
    cmp -s "$hook" "$site/_torchvision_without_ops.py" || cp "$hook" \
      "$site/_torchvision_without_ops.py"
    echo 'import _torchvision_without_ops as h; h.install_hook()' \
      > "$site/torchvision_without_ops.pth"
    satisfied "$(pin torchvision)" || { echo "[setup:$stack] installing $(pin torchvision)"
      "${pip[@]}" install -c "$pins" "$(pin torchvision)"; }
    satisfied "$(pin chumpy)" || { echo "[setup:$stack] installing $(pin chumpy)"
      "${pip[@]}" install --no-build-isolation --no-cache-dir -c "$pins" "$(pin chumpy)"; }
    satisfied "$(pin xtcocotools)" && "$vpy" -c 'import xtcocotools._mask' 2>/dev/null || {
      echo "[setup:$stack] installing $(pin xtcocotools) (from its source)"
      "${pip[@]}" install --force-reinstall --no-deps --no-cache-dir \
        --no-binary xtcocotools "$(pin xtcocotools)"
      "${pip[@]}" install -c "$pins" "$(pin xtcocotools)"; }  # its other requirements
    local codebases=("$(pin mmpretrain)" "$(pin mmpose)" "$(pin mmrotate-dev)")
    satisfied "${codebases[@]}" || { echo "[setup:$stack] installing ${codebases[*]}"
      "${pip[@]}" install -c "$pins" "${codebases[@]}"; }
  fi

  link_mmrepro
  pip_checked || return 1
  echo "[setup:$stack] ready: $link -> $env"
}

# mmcv with its C++ ops, built against the torch $vpy imports, once per stack and mmcv
# version into $wheels (the wheel's name holds the version: a new pin is never served an
# old wheel); sets mmcv_wheel to the wheel's path prefix. Its setup.py needs an older
# setuptools than torch 2.13 does: the build takes it from a directory of its own, first
# on PYTHONPATH for the build only, so the environment's setuptools never changes (the
# environment's bin/ gives the build its ninja). mmcv 2.0.x compiles its ops as C++14,
# older than torch 2.1's headers allow (mmcv 2.1 asks for C++17 itself): the compiler the
# build is given (CXX) asks for C++17 instead.
build_mmcv() {
  mmcv_wheel="$wheels/mmcv-$(pin mmcv | sed 's/^mmcv==//')-"
  ls "$mmcv_wheel"*.whl >/dev/null 2>&1 && return 0
  echo "[setup:$stack] building $(pin mmcv) with ops (first time: ~11 min on 2 cores)"
  local build_tools
  build_tools=$(mktemp -d)
  "${pip[@]}" install --no-deps --target "$build_tools" -r "$root/requirements/build-mmcv.txt"
  mkdir -p "$wheels" "$build_tools/bin"
  printf '#!/bin/sh\n%s\nexec %s "$@"\n' \
    'for a; do shift; [ "$a" = -std=c++14 ] && a=-std=c++17; set -- "$@" "$a"; done' \
    "$(command -v "${CXX:-g++}")" > "$build_tools/bin/g++"
  chmod +x "$build_tools/bin/g++"
  PYTHONPATH="$build_tools" PATH="$env/bin:${build_bin:-}$PATH" CXX="$build_tools/bin/g++" \
    MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-2}" FORCE_CUDA=0 "${pip[@]}" wheel \
    --no-build-isolation --no-deps --no-cache-dir -w "$wheels" "$(pin mmcv)"
  rm -rf "$build_tools"
}

# mmrepro itself, from this checkout, in $env.
link_mmrepro() {
  # A script run with this environment's python from anywhere, a codebase's own
  # tools/train.py included, imports it (its config's custom_imports). A link to the
  # checkout's package in site-packages, and the .pth line mmrepro's wheel installs
  # (mmrepro/configs.py: `mmrepro::` config paths resolve before custom_imports runs).
  # Not `pip install -e`: MMEngine looks for an installed distribution's `package::`
  # configs in site-packages, beside its metadata, where an editable install has no
  # files, so `mmrepro::` paths fail. Checkouts share the environment: it holds the one
  # that last ran this script, as the console scripts do. A checkout's own tests and
  # tools import that checkout (first on sys.path). tests/e2e/test_install.py installs
  # mmrepro's wheel into an environment of its own.
  local site_dir
  site_dir=$(echo "$env"/lib/python3*/site-packages)
  if "$vpy" -m pip --disable-pip-version-check show -q mmrepro >/dev/null 2>&1; then
    echo "[setup:$stack] removing the installed mmrepro distribution (the checkout is linked)"
    "${pip[@]}" uninstall -y mmrepro
  fi
  [ "$(readlink "$site_dir/mmrepro" || true)" = "$root/mmrepro" ] || {
    echo "[setup:$stack] linking mmrepro from $root"
    ln -sfn "$root/mmrepro" "$site_dir/mmrepro"; }
  "$vpy" - "$root/mmrepro/configs.py" "$site_dir" <<'PY'
import importlib.util, os, sys
spec = importlib.util.spec_from_file_location('_mmrepro_configs', sys.argv[1])
configs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(configs)
path = os.path.join(sys.argv[2], configs.PTH_NAME)
line = configs.PTH_LINE + '\n'
if not os.path.isfile(path) or open(path).read() != line:
    with open(path, 'w') as f:
        f.write(line)
PY
  write_console_scripts "$env"
}

# Every installed requirement of $env met (tests/unit/test_environment.py holds it too).
pip_checked() {
  local check
  if ! check=$("$vpy" -m pip --disable-pip-version-check check 2>&1); then
    echo "$check" | sed "s/^/[setup:$stack] pip check: /" >&2
    echo "[setup:$stack] not ready: pip check (above) names requirements this script left" \
      "unmet; fix requirements/stack-$stack.txt or this script" >&2
    return 1
  fi
}

# The yolo stack: MMYOLO 0.6.0 refuses mmcv 2.1 at import, so it gets an environment of
# its own that sees the floor's packages (torch 2.1.2, mmengine, mmdet, albumentations
# ...) through a .pth line, with its own mmcv 2.0.1, built against the floor's torch,
# before them on sys.path (docs/install.md). No second torch: the floor's serves both.
setup_yolo() {
  local stack=yolo pins="$root/requirements/stack-yolo.txt" env="$home/envs/yolo"
  local link="$root/.venv-yolo" wheels="$home/wheels/yolo" base="$home/envs/floor"
  [ -d "$link" ] && [ ! -L "$link" ] && env="$link"
  local vpy="$env/bin/python" site base_site build_bin="$base/bin:"  # the floor's ninja
  local pip=("$vpy" -m pip --disable-pip-version-check -q)
  [ -x "$base/bin/python" ] || setup_stack floor
  if [ ! -x "$vpy" ]; then
    echo "[setup:$stack] creating $env with $($py --version), over the floor's packages"
    "$py" -m venv "$env"
  fi
  [ "$env" = "$link" ] || ln -sfn "$env" "$link"
  site=$(echo "$env"/lib/python3*/site-packages)
  base_site=$(echo "$base"/lib/python3*/site-packages)
  [ "$(cat "$site/floor_packages.pth" 2>/dev/null)" = "$base_site" ] || \
    echo "$base_site" > "$site/floor_packages.pth"
  # Installed here, never over the floor's (--ignore-installed: pip sees the floor's
  # mmcv 2.1.0 through the .pth line and would otherwise keep it).
  if ! satisfied "$(pin mmcv)" || ! "$vpy" -c "import mmcv.ops" 2>/dev/null; then
    build_mmcv
    "${pip[@]}" install --no-deps --ignore-installed "$mmcv_wheel"*.whl
  fi
  satisfied "$(pin mmyolo)" "$(pin prettytable)" "$(pin wcwidth)" || {
    echo "[setup:$stack] installing $(pin mmyolo)"
    "${pip[@]}" install --no-deps --ignore-installed "$(pin mmyolo)" "$(pin prettytable)" \
      "$(pin wcwidth)"; }
  link_mmrepro
  pip_checked || return 1
  echo "[setup:$stack] ready: $link -> $env"
}

# README's console scripts (setup.cfg's), running this checkout's mmrepro through
# PYTHONPATH (first, whatever else is on sys.path); a checkout that runs this script
# takes them over, as it does the link to mmrepro (step 5).
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

for stack in "${stacks[@]}"; do
  if [ "$stack" = yolo ]; then setup_yolo; else setup_stack "$stack"; fi
done
