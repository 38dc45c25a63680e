#!/usr/bin/env bash
# Build every Triton kernel variant mmrepro's ops launch for six GPU targets (no GPU
# needed) and write the resource table (registers, spills, shared memory per kernel,
# variant and target) to benchmarks/results/aot_builds.md.
#   bash benchmarks/aot_builds.sh            (PYTHON default: .venv/bin/python)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" TRITON_CACHE_DIR="$work/cache"
TRITON_INTERPRET=1 OMP_NUM_THREADS=1 "$py" -m mmrepro.ops.aot.capture "$work/variants.json"
env -u TRITON_INTERPRET "$py" -m mmrepro.ops.aot.build "$work/variants.json" \
  --table "$work/table.md" || status=$?
out="$root/benchmarks/results/aot_builds.md"
{
  echo "# Ahead-of-time builds of mmrepro's Triton kernels"
  echo
  echo "Written by \`bash benchmarks/aot_builds.sh\` on $(date -u +%Y-%m-%d), triton" \
    "$("$py" -c 'import triton; print(triton.__version__)'), no GPU. One row per"
  echo "variant the ops launch (captured from real launches); per target: registers per"
  echo "thread, spilled bytes (local memory and stack), shared memory per block. No build"
  echo "holds an atomic instruction (a build with one fails the tier and would be named here)."
  echo
  cat "$work/table.md"
} > "$out"
echo "wrote $out"
exit "${status:-0}"
