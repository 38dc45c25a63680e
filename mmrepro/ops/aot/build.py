"""Build mmrepro's Triton kernels for real GPUs, without a GPU, and read the builds.

Triton compiles for a named target without a device:
``triton.compile(ASTSource(...), target=GPUTarget('cuda', capability, 32))`` gives the
PTX and, through the ``ptxas`` in Triton's wheel, the cubin. For every variant that
:mod:`mmrepro.ops.aot.capture` recorded and every target in :data:`TARGETS`, this
module builds it and reads off what the hardware will run:

- atomic instructions in the PTX (``atom.``/``red.``): mmrepro's backward passes
  promise none;
- approximate divisions (``div.full``/``div.approx``: Triton's float32 ``/``), which
  a kernel that must repeat another kernel's arithmetic cannot use;
- registers, spills (local memory and stack, from ``cuobjdump -res-usage``) and
  shared memory, against what the target offers.

Run as ``python -m mmrepro.ops.aot.build VARIANTS.json [--table OUT.md] [--jobs N]``
(without ``TRITON_INTERPRET``); exit code 0 when every build succeeds without
atomics and fits, 1 otherwise, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import functools
import importlib
import json
import os
import os.path as osp
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence

from .capture import Variant, load_variants

__all__ = ['MAX_SHARED', 'TARGETS', 'Build', 'build', 'build_all', 'problems', 'table']

#: Compute capabilities built for: V100, T4, A100, A10/RTX 30xx, L4/RTX 40xx, H100.
TARGETS = (70, 75, 80, 86, 89, 90)
#: Shared memory one block may use on each target (bytes, opt-in maximum).
MAX_SHARED = {70: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024,
              89: 99 * 1024, 90: 227 * 1024}
#: Registers one thread may use on every target.
MAX_REGISTERS = 255
_ATOMIC = re.compile(r'^\s*(@!?%p\d+\s+)?(atom|red)\.', re.M)
_APPROX_DIV = re.compile(r'\bdiv\.(full|approx)\.')
_USAGE = re.compile(r'REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)')


@dataclass(frozen=True)
class Build:
    """What one variant's build for one target holds (``error`` when it failed)."""

    kernel: str
    label: str
    capability: int
    registers: int = 0
    spill_bytes: int = 0
    shared: int = 0
    atomics: int = 0
    approx_divisions: int = 0
    error: str = ''


@functools.cache
def _jit_function(kernel: str) -> Any:
    """The ``JITFunction`` named ``module:qualname`` (from a kernel factory if nested)."""
    module_name, qualname = kernel.split(':')
    module = importlib.import_module(module_name)
    if '.<locals>.' not in qualname:
        return getattr(module, qualname)
    factory = getattr(module, qualname.split('.<locals>.')[0])
    for value in vars(factory()).values():
        if getattr(getattr(value, 'fn', None), '__qualname__', None) == qualname:
            return value
    raise LookupError(f'aot_build: kernel {kernel} not found in {factory.__name__}()')


def _constexpr(value: Any) -> Any:
    if isinstance(value, str) and value.startswith('tl.'):
        import triton.language as tl
        return getattr(tl, value[3:])
    return value


def _cuobjdump() -> str:
    import triton
    return osp.join(osp.dirname(triton.__file__), 'backends', 'nvidia', 'bin', 'cuobjdump')


def build(variant: Variant, capability: int) -> Build:
    """Build ``variant`` for ``sm_<capability>`` and read its resources."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    fn = _jit_function(variant.kernel)
    signature = dict(variant.signature)
    constexprs = {(i,): _constexpr(v) for i, v in variant.constexprs}
    attrs = {(i,): [list(a) for a in v] for i, v in variant.attrs}
    head = dict(kernel=variant.name, label=variant.label, capability=capability)
    try:
        compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs),
                                  target=GPUTarget('cuda', capability, 32),
                                  options=dict(num_warps=variant.num_warps))
    except Exception as e:  # noqa: BLE001 - a failed build is a result
        return Build(**head, error=f'{type(e).__name__}: {str(e).splitlines()[0][:200]}')
    with tempfile.NamedTemporaryFile(suffix='.cubin') as f:
        f.write(compiled.asm['cubin'])
        f.flush()
        usage = subprocess.run([_cuobjdump(), '-res-usage', f.name], capture_output=True,
                               text=True, check=True).stdout
    match = _USAGE.search(usage)
    if match is None:
        return Build(**head, error=f'cuobjdump printed no resource usage: {usage[:200]}')
    registers, stack, shared, local = map(int, match.groups())
    return Build(**head, registers=registers, spill_bytes=stack + local,
                 shared=max(shared, compiled.metadata.shared),
                 atomics=len(_ATOMIC.findall(compiled.asm['ptx'])),
                 approx_divisions=len(_APPROX_DIV.findall(compiled.asm['ptx'])))


def _build_pair(pair: tuple) -> Build:
    return build(*pair)


def build_all(variants: Sequence[Variant], targets: Sequence[int] = TARGETS,
              jobs: Optional[int] = None) -> List[Build]:
    """Build every variant for every target, ``jobs`` processes at a time."""
    pairs = [(v, t) for v in variants for t in targets]
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1:
        return [build(*p) for p in pairs]
    with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_build_pair, pairs, chunksize=4))


def problems(builds: Sequence[Build]) -> List[str]:
    """One line per failed build, atomic instruction, or resource over the target's."""
    out = []
    for b in builds:
        where = f'{b.kernel} [{b.label}] sm_{b.capability}'
        if b.error:
            out.append(f'{where}: build failed: {b.error}')
        elif b.atomics:
            out.append(f'{where}: {b.atomics} atomic instruction(s) in the PTX')
        elif b.shared > MAX_SHARED[b.capability]:
            out.append(f'{where}: {b.shared} B shared memory > {MAX_SHARED[b.capability]}')
        elif b.registers > MAX_REGISTERS:
            out.append(f'{where}: {b.registers} registers > {MAX_REGISTERS}')
    return out


def table(builds: Sequence[Build]) -> str:
    """A Markdown table: one row per kernel variant, registers/spills/shared per target."""
    targets = sorted({b.capability for b in builds})
    rows: Dict[tuple, Dict[int, Build]] = {}
    for b in builds:
        rows.setdefault((b.kernel, b.label), {})[b.capability] = b
    lines = ['| kernel | variant | ' + ' | '.join(f'sm_{t}' for t in targets) + ' |',
             '|---|---|' + '---|' * len(targets)]
    for (kernel, label), by_target in sorted(rows.items()):
        cells = []
        for t in targets:
            b = by_target.get(t)
            cells.append('-' if b is None else 'FAILED' if b.error else
                         f'{b.registers} r, {b.spill_bytes} B spill, {b.shared} B smem'
                         + (f', {b.atomics} atomics' if b.atomics else ''))
        lines.append(f'| {kernel} | {label} | ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines) + '\n'


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m mmrepro.ops.aot.build VARIANTS.json``: see the module docstring."""
    parser = argparse.ArgumentParser(prog='python -m mmrepro.ops.aot.build',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('variants', help='JSON written by mmrepro.ops.aot.capture')
    parser.add_argument('--table', help='write the resource table (Markdown) here')
    parser.add_argument('--json', help='write every build (JSON list) here')
    parser.add_argument('--jobs', type=int, default=None, help='build processes')
    parser.add_argument('--targets', type=int, nargs='+', default=list(TARGETS),
                        help='compute capabilities (default: %(default)s)')
    args = parser.parse_args(argv)
    if os.environ.get('TRITON_INTERPRET', '0') not in ('', '0'):
        parser.error('TRITON_INTERPRET is set; builds need the compiler: unset it')
    builds = build_all(load_variants(args.variants), args.targets, args.jobs)
    if args.table:
        with open(args.table, 'w') as f:
            f.write(table(builds))
    if args.json:
        with open(args.json, 'w') as f:
            json.dump([asdict(b) for b in builds], f)
    found = problems(builds)
    print(f'aot_build: {len(builds)} builds, {len(found)} problem(s)')
    print('\n'.join(found))
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
