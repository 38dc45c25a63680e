"""mmrepro.determinism.mode: deterministic flags and cuBLAS's workspace variable."""
import os
import subprocess
import sys

import pytest
import torch
from support.repro_utils import REPO, pythonpath

from mmrepro.determinism import mode
from mmrepro.determinism.mode import set_deterministic
from mmrepro.rng.seeding import set_random_seed


@pytest.fixture(autouse=True)
def _restore_cublas_variable():
    """Put the variable back: ``monkeypatch.delenv`` of an absent variable records nothing,
    so a value the code under test sets would leak into the next test in this process."""
    before = os.environ.get('CUBLAS_WORKSPACE_CONFIG')
    yield
    if before is None:
        os.environ.pop('CUBLAS_WORKSPACE_CONFIG', None)
    else:
        os.environ['CUBLAS_WORKSPACE_CONFIG'] = before


def test_deterministic_sets_flags():
    try:
        set_random_seed(1, deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        set_deterministic(True, warn_only=True)
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False


@pytest.mark.parametrize('version, cuda, needed', [
    ('2.9.1+cu128', '12.8', True), ('2.10.0+cu130', '13.0', False),
    ('2.11.0+cu130', '13.0', False), ('2.9.1+cpu', None, False)])
def test_cublas_config_needed_by_version(monkeypatch, version, cuda, needed):
    monkeypatch.setattr(torch, '__version__', version)
    monkeypatch.setattr(torch.version, 'cuda', cuda)
    assert mode.cublas_config_needed_by_version() is needed


@pytest.mark.parametrize('needed', [True, False])
def test_cublas_variable_set_before_cuda_only_where_torch_needs_it(monkeypatch, needed):
    monkeypatch.delenv('CUBLAS_WORKSPACE_CONFIG', raising=False)
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: False)
    monkeypatch.setattr(mode, 'cublas_config_needed_by_version', lambda: needed)
    mode.prepare_cublas_workspace_config()
    assert os.environ.get('CUBLAS_WORKSPACE_CONFIG') == (':4096:8' if needed else None)
    monkeypatch.delenv('CUBLAS_WORKSPACE_CONFIG', raising=False)
    mode.ensure_cublas_workspace_config()
    assert os.environ.get('CUBLAS_WORKSPACE_CONFIG') == (':4096:8' if needed else None)


def test_cublas_variable_kept_when_set(monkeypatch):
    monkeypatch.setenv('CUBLAS_WORKSPACE_CONFIG', ':16:8')
    monkeypatch.setattr(mode, 'cublas_config_needed_by_version', lambda: True)
    mode.prepare_cublas_workspace_config()
    mode.ensure_cublas_workspace_config()
    assert os.environ['CUBLAS_WORKSPACE_CONFIG'] == ':16:8'


def test_import_leaves_the_variable_alone_on_this_torch():
    """This torch (CPU build) does not need it, so importing mmrepro sets nothing."""
    env = {k: v for k, v in os.environ.items() if k != 'CUBLAS_WORKSPACE_CONFIG'}
    env['PYTHONPATH'] = pythonpath(REPO)
    out = subprocess.run(
        [sys.executable, '-c', 'import os, mmrepro; '
         'print(os.environ.get("CUBLAS_WORKSPACE_CONFIG"))'],
        env=env, check=True, capture_output=True, text=True).stdout.split()[-1]
    assert out == (':4096:8' if mode.cublas_config_needed_by_version() else 'None')


def test_cublas_error_when_cuda_already_started_and_torch_needs_it(monkeypatch):
    monkeypatch.delenv('CUBLAS_WORKSPACE_CONFIG', raising=False)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: True)
    monkeypatch.setattr(mode, '_cublas_config_needed_at_run_time', lambda: True)
    with pytest.raises(RuntimeError, match=r'CUBLAS_WORKSPACE_CONFIG with this torch .* '
                       r'CUDA is already initialised.*export '
                       r'CUBLAS_WORKSPACE_CONFIG=:4096:8'):
        set_deterministic(True)
    assert not torch.are_deterministic_algorithms_enabled()


def test_no_error_when_cuda_started_and_torch_does_not_need_it(monkeypatch):
    """MMDetection's launcher starts CUDA first; torch >= 2.10 needs no variable."""
    monkeypatch.delenv('CUBLAS_WORKSPACE_CONFIG', raising=False)
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    monkeypatch.setattr(torch.cuda, 'is_initialized', lambda: True)
    monkeypatch.setattr(mode, '_cublas_config_needed_at_run_time', lambda: False)
    try:
        set_deterministic(True)
        assert torch.are_deterministic_algorithms_enabled()
        assert 'CUBLAS_WORKSPACE_CONFIG' not in os.environ
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = False
