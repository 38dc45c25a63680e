"""MMEngine's ``compile`` with inductor on CUDA, in deterministic mode.

What inductor needs for exact numbers on a GPU, each set or refused by mmrepro
(``mmrepro.determinism.compile``): eager's random numbers (``fallback_random``) and no
kernel chosen by timing it (``deterministic``, where torch has it), set and recorded;
kernels that would accumulate with atomics (``index_put`` with ``accumulate``) are
eager's deterministic ones in deterministic mode; CUDA graphs (``mode='reduce-overhead'``)
refused in one line. A tiny classifier (``support/tiny_classifier.py``) trained compiled
on the GPU resumes mid-epoch to the same bytes. The ``cuda`` tier (``bash
tools/test_cuda.sh``); skipped without a GPU.
"""
from __future__ import annotations

import pytest
from support.repro_utils import (
    TESTS,
    atomics,
    checkpoint,
    pythonpath,
    run_train,
    state_digest,
)
from support.tiny_classifier import config_text

from mmrepro.record.run_record import load_run_record

pytestmark = [pytest.mark.cuda, pytest.mark.slow]
ENV = {'PYTHONPATH': pythonpath(TESTS)}


def _config(tmp_path, name: str, compile_line: str) -> str:
    path = tmp_path / f'{name}.py'
    path.write_text(config_text(compile_line=compile_line))
    return str(path)


def test_inductor_on_cuda_resumes_mid_epoch_exactly_with_its_settings_recorded(tmp_path):
    config = _config(tmp_path, 'inductor', 'compile = True')
    base = str(tmp_path / 'base')
    run_train(config, base, env=ENV)
    resumed = str(tmp_path / 'resumed')
    run_train(config, resumed, '--resume', checkpoint(base, 'iter_6.pth'), env=ENV)
    assert state_digest(checkpoint(resumed)) == state_digest(checkpoint(base))
    record = load_run_record(base)[0]
    assert record['devices']['cuda'] and record['torch_flags']['deterministic_algorithms']
    inductor = record['compile']['inductor']
    assert inductor['fallback_random'] is True
    import torch._inductor.config as config_module
    if hasattr(config_module, 'deterministic'):
        assert inductor['deterministic'] is True


def test_max_autotune_picks_kernels_without_timing_where_torch_can(tmp_path):
    """Where torch has inductor's ``deterministic``, mmrepro sets it: kernels are not
    chosen by timing, so two processes compile alike; elsewhere the mode is refused."""
    import torch._inductor.config as config_module
    config = _config(tmp_path, 'autotune', "compile = dict(mode='max-autotune')")
    if not hasattr(config_module, 'deterministic'):
        proc = run_train(config, str(tmp_path / 'refused'), check=False, env=ENV)
        assert proc.returncode == 2
        assert "compile: mode='max-autotune': inductor picks kernels by timing them" in \
            proc.stderr
        return
    first, second = str(tmp_path / 'first'), str(tmp_path / 'second')
    for work_dir in (first, second):
        run_train(config, work_dir, env=ENV)
    assert state_digest(checkpoint(first)) == state_digest(checkpoint(second))


def test_cuda_graphs_are_refused_in_one_line(tmp_path):
    config = _config(tmp_path, 'graphs', "compile = dict(mode='reduce-overhead')")
    proc = run_train(config, str(tmp_path / 'refused'), check=False, env=ENV)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(
        "train.py: error: compile: mode='reduce-overhead' (CUDA graphs): "), proc.stderr


def test_accumulating_index_put_uses_no_atomics_in_deterministic_mode():
    """In deterministic mode inductor's accumulating ``index_put`` is eager's
    deterministic kernel; without it, ``tl.atomic_add``."""
    assert atomics('cuda') == ['deterministic', 'False', 'default', 'True']


def test_a_compiled_classifier_reruns_alike_on_cuda(tmp_path):
    config = _config(tmp_path, 'aot', "compile = dict(backend='aot_eager')")
    first, second = str(tmp_path / 'first'), str(tmp_path / 'second')
    for work_dir in (first, second):
        run_train(config, work_dir, env=ENV)
    assert state_digest(checkpoint(first)) == state_digest(checkpoint(second))
    assert load_run_record(first)[0]['devices']['cuda']
