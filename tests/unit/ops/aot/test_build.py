"""Ahead-of-time tier: every kernel variant the ops launch builds for six GPU targets.

No GPU is needed: Triton compiles to PTX and cubin for a named target. The variants
come from real launches of the ops under the interpreter (``aot_capture``); the builds
run without it (``aot_build``), in subprocesses: about 45 seconds of capture, then 2.5
minutes of builds on 2 cores, or seconds when Triton's build cache (kept between test
runs, :func:`_build_cache`) already holds them.
"""
from __future__ import annotations

import glob
import json
import os
import os.path as osp
import shutil
import subprocess
import sys

import pytest
from support.repro_utils import REPO, env_home, pythonpath, skip_unless_triton_kernels_run

from mmrepro.ops.aot.build import TARGETS
from mmrepro.ops.aot.capture import load_variants, uncovered

skip_unless_triton_kernels_run()

#: The two kernels whose registers the zoo's channel counts bound (at most 128).
BOUNDED = ('bilinear_kernels.forward_kernel', 'bilinear_kernels.sample_grads_kernel')


def _build_cache() -> str:
    """Triton's build cache for this tier, kept between test runs (as Triton keeps its
    own in ``~/.triton/cache``) beside the test environments.

    Triton finds a build there only under a key of the kernel's source (its dependencies
    included), its specialisation, the target, the options and the compiler's own
    version, so a hit is the build Triton would make, and a kernel whose source changed
    is built again while the others still hit. The folder is named after Triton's
    version (each stack's its own; a build set is about 200 MB); folders of the older
    naming, by mmrepro's op sources, are removed.
    """
    import triton
    parent, name = osp.join(env_home(), 'triton-aot'), f'triton-{triton.__version__}'
    for old in glob.glob(osp.join(parent, '*')):
        if not osp.basename(old).startswith('triton-'):
            shutil.rmtree(old, ignore_errors=True)
    return osp.join(parent, name)


def _env(interpret: bool, cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != 'TRITON_INTERPRET'}
    env.update(PYTHONPATH=pythonpath(REPO, osp.join(REPO, 'tests')), OMP_NUM_THREADS='1',
               TRITON_CACHE_DIR=cache)
    if interpret:
        env['TRITON_INTERPRET'] = '1'
    return env


def _run(args, interpret: bool, tmp: str, cache: str = '') -> subprocess.CompletedProcess:
    env = _env(interpret, cache or osp.join(tmp, 'triton-cache'))
    return subprocess.run([sys.executable, '-m', *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope='module')
def aot(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp('aot'))
    variants = osp.join(tmp, 'variants.json')
    captured = _run(['mmrepro.ops.aot.capture', variants], True, tmp)
    assert captured.returncode == 0, captured.stderr[-3000:]
    built = _run(['mmrepro.ops.aot.build', variants, '--json', osp.join(tmp, 'builds.json'),
                  '--table', osp.join(tmp, 'table.md')], False, tmp, _build_cache())
    with open(osp.join(tmp, 'builds.json')) as f:
        return load_variants(variants), json.load(f), built


def test_every_variant_builds_for_six_targets_without_atomics(aot):
    variants, builds, built = aot
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert len({v.name for v in variants}) == 7
    assert len(builds) == len(variants) * len(TARGETS)
    assert {b['capability'] for b in builds} == set(TARGETS)
    assert [b for b in builds if b['error'] or b['atomics']] == []
    assert f'aot_build: {len(builds)} builds, 0 problem(s)' in built.stdout


def test_roi_align_backward_divides_as_cuda_does(aot):
    """Its coordinates repeat the forward's: correctly rounded divisions only."""
    entries = [b for b in aot[1] if b['kernel'] == 'triton_entries.entries_kernel']
    assert len(entries) == 4 * len(TARGETS)  # one per input dtype
    assert [b for b in entries if b['approx_divisions']] == []


def test_rotated_backward_divides_as_cuda_does(aot):
    """Its coordinates repeat mmcv's fp16/32/64 kernels (no bfloat16 there): correctly
    rounded divisions only; rotated_feature_align's entries kernel for 1 and 5 points."""
    kernels = {'triton_rotated.rotated_entries_kernel': 3,
               'triton_rotated.point_entries_kernel': 3 * 2}
    for kernel, variants in kernels.items():
        builds = [b for b in aot[1] if b['kernel'] == kernel]
        assert len(builds) == variants * len(TARGETS)
        assert [b for b in builds if b['approx_divisions']] == []


def test_every_jit_function_is_covered(aot):
    sources = {osp.basename(p)[:-3]: open(p).read()
               for p in glob.glob(osp.join(REPO, 'mmrepro', '**', '*.py'), recursive=True)}
    assert uncovered(sources, aot[0]) == []


def _zoo(label: str) -> bool:
    """The zoo's channel counts (1, 32, 64, 256) specialise as 1 or as multiples of 16."""
    return 'channels=1' in label or '(channels %16)' in label


def test_no_spills_and_bounded_registers_below_float64(aot):
    lower = [b for b in aot[1] if 'fp64' not in b['label']]
    assert [b for b in lower if b['spill_bytes']] == []
    over = [(b['kernel'], b['label'], b['capability'], b['registers']) for b in lower
            if b['kernel'] in BOUNDED and _zoo(b['label']) and b['registers'] > 128]
    assert over == []
    # Channels that are no multiple of 16 (24 here) cost more registers, still no spills.
    assert any(b['registers'] > 128 for b in lower if not _zoo(b['label']))


def _probe(tmp_path, name, signature):
    probe = tmp_path / 'probe.json'
    probe.write_text(json.dumps([dict(
        kernel=f'support.aot_atomic_probe:{name}', signature=signature, constexprs=[[2, 128]],
        attrs=[[0, [['tt.divisibility', 16]]]], num_warps=4)]))
    built = _run(['mmrepro.ops.aot.build', str(probe), '--targets', '90', '--json',
                  str(tmp_path / 'builds.json')], False, str(tmp_path))
    return built, json.loads((tmp_path / 'builds.json').read_text())[0]


def test_an_atomic_instruction_fails_the_tier(tmp_path):
    built, build = _probe(tmp_path, 'atomic_probe_kernel',
                          [['x', '*fp32'], ['n', 'i32'], ['BLOCK', 'constexpr']])
    assert built.returncode == 1 and build['atomics'] > 0
    assert 'aot_build: 1 builds, 1 problem(s)' in built.stdout
    assert 'aot_atomic_probe.atomic_probe_kernel [fp32 BLOCK=128] sm_90: ' in built.stdout
    assert 'atomic instruction(s) in the PTX' in built.stdout


def test_an_approximate_division_is_counted(tmp_path):
    built, build = _probe(tmp_path, 'divide_probe_kernel',
                          [['x', '*fp32'], ['y', '*fp32'], ['BLOCK', 'constexpr']])
    assert built.returncode == 0 and build['approx_divisions'] > 0
