"""Seeding core: drawn numbers, validation messages, deterministic flags."""
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from repro_utils import REPO, pythonpath

from mmrepro.determinism import mode
from mmrepro.determinism.mode import set_deterministic
from mmrepro.rng.seeding import init_random_seed, set_random_seed
from mmrepro.run.settings import has_fill_uninitialized_memory, validate_randomness


def _draw():
    return (random.random(), float(np.random.rand()), float(torch.rand(1)))


def test_set_random_seed_reproduces_every_stream():
    assert set_random_seed(123) == 123
    first = _draw()
    set_random_seed(123)
    assert _draw() == first
    set_random_seed(124)
    assert _draw() != first


def test_diff_rank_seed_without_distributed_is_rank_zero():
    assert set_random_seed(7, diff_rank_seed=True) == 7


def test_init_random_seed_returns_given_and_draws_in_range():
    assert init_random_seed(5) == 5
    drawn = {init_random_seed() for _ in range(4)}
    assert all(0 <= s < 2**32 for s in drawn)
    assert len(drawn) > 1  # os entropy, not a global RNG


def test_init_random_seed_ignores_global_seeding():
    set_random_seed(0)
    a = init_random_seed()
    set_random_seed(0)
    assert init_random_seed() != a  # same global state, new draw (1 in 2**32 to fail)


@pytest.mark.parametrize('seed, exc, match', [
    (True, TypeError, r'randomness.seed must be an int in \[0, 4294967295\], got True'),
    ('1', TypeError, r"got '1' \(str\)"),
    (1.5, TypeError, r'got 1.5 \(float\)'),
    (-1, ValueError, r'must be in \[0, 4294967295\] \(2\*\*32 - 1\), got -1'),
    (2**32, ValueError, r'got 4294967296'),
])
def test_bad_seed_messages(seed, exc, match):
    with pytest.raises(exc, match=match):
        validate_randomness(dict(seed=seed))


def test_set_random_seed_rejects_bad_seed():
    with pytest.raises(ValueError, match=r'seed must be in \[0, 4294967295\]'):
        set_random_seed(2**32)
    with pytest.raises(TypeError, match='seed must be an int'):
        set_random_seed(None)


def test_unknown_key_names_key_and_accepted_keys():
    with pytest.raises(ValueError) as info:
        validate_randomness(dict(sede=1))
    assert str(info.value) == (
        "Unknown key(s) ['sede'] in `randomness`; accepted keys are ['cpu_isa', "
        "'deterministic', 'diff_rank_seed', 'fill_uninitialized_memory', 'global_batch', "
        "'global_stream', 'keyed_cache', 'sample_seeding', 'seed', 'strict', 'threads', "
        "'warn_only']. Check the spelling or remove them.")


@pytest.mark.parametrize('key', ['deterministic', 'diff_rank_seed', 'sample_seeding',
                                 'keyed_cache', 'global_stream'])
def test_flags_must_be_bool(key):
    with pytest.raises(TypeError, match=rf'randomness.{key} must be True or False, got 1 '
                       r'\(int\)'):
        validate_randomness({key: 1})


def test_randomness_must_be_a_dict():
    with pytest.raises(TypeError, match=r'`randomness` must be a dict'):
        validate_randomness([('seed', 1)])


def test_defaults_filled():
    out = validate_randomness(dict(seed=3))
    assert out['seed'] == 3 and out['deterministic'] is False
    assert out['sample_seeding'] is True and out['keyed_cache'] is True


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


def test_fill_uninitialized_memory_switch():
    if not has_fill_uninitialized_memory():  # torch 2.1: a clear error, nothing set
        with pytest.raises(ValueError, match=(
                r'^randomness\.fill_uninitialized_memory=False needs torch >= 2\.2 '
                r'\(torch\.utils\.deterministic\), but torch 2\.1\.2\S* is installed\. '
                r"Remove the key to keep this torch's behaviour, or upgrade torch\.$")):
            validate_randomness(dict(fill_uninitialized_memory=False))
        with pytest.raises(ValueError, match=r'^fill_uninitialized_memory=True needs torch'):
            set_random_seed(1, deterministic=True, fill_uninitialized_memory=True)
        assert not torch.are_deterministic_algorithms_enabled()
        return
    try:
        set_random_seed(1, deterministic=True, fill_uninitialized_memory=False)
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        set_random_seed(1, deterministic=True, fill_uninitialized_memory=True)
        assert torch.utils.deterministic.fill_uninitialized_memory is True
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = True


def test_hash_seed_reexec_fixes_hashing_in_the_process(tmp_path):
    script = tmp_path / 'probe.py'
    script.write_text(
        'import sys\n'
        'from mmrepro.cli.train import reexec_with_hash_seed\n'
        'if sys.argv[1] == "fix":\n'
        '    reexec_with_hash_seed(5, sys.argv)\n'
        'print(hash("mmrepro"))\n')
    # mmrepro from this checkout, whether or not it is pip-installed.
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONHASHSEED'}
    env['PYTHONPATH'] = pythonpath(REPO)

    def run(mode):
        return subprocess.run([sys.executable, str(script), mode], env=env, check=True,
                              capture_output=True, text=True).stdout.split()[-1]

    assert run('fix') == run('fix')
    assert run('free') != run('free')  # randomised without it


@pytest.mark.parametrize('threads, exc', [(0, ValueError), ('2', TypeError), (True, TypeError),
                                          (1.0, TypeError)])
def test_bad_threads_messages(threads, exc):
    with pytest.raises(exc) as info:
        validate_randomness(dict(threads=threads))
    assert str(info.value) == (
        f'randomness.threads must be a whole number >= 1 (PyTorch intra-op threads per '
        f"process), got {threads!r}. Set e.g. `randomness=dict(threads=1)`, or remove the "
        "key to keep PyTorch's default (OMP_NUM_THREADS, else the number of cores).")


@pytest.mark.parametrize('value, exc', [(0, ValueError), (16.0, TypeError)])
def test_bad_global_batch_messages(value, exc):
    with pytest.raises(exc) as info:
        validate_randomness(dict(global_batch=value))
    assert str(info.value) == (
        'randomness.global_batch must be a whole number >= 1 (samples per optimizer step '
        f'over all ranks), got {value!r}. Set e.g. `randomness=dict(global_batch=16)`, or '
        'remove the key to accept any layout.')


def test_threads_default_to_pytorchs_own():
    assert validate_randomness({})['threads'] is None
    assert validate_randomness(dict(threads=3))['threads'] == 3
