"""runner.randomness, ReproRunner.set_randomness: the intra-op thread count it pins; the seed log
line says where the seed came from (the config, ``--seed`` or ``--cfg-options`` as
``tools/train.py`` notes it, a checkpoint, or drawn)."""
import re

import pytest
import torch
from mmengine.runner import Runner
from support.toy_runner import Regressor

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.runner.randomness import note_seed_source


def _runner(tmp_path, **randomness):
    return Runner(model=Regressor(), work_dir=str(tmp_path), randomness=dict(seed=0, **randomness),
                  custom_hooks=[dict(type='ReproducibilityHook')],
                  experiment_name=f'threads-{randomness.get("threads")}-{id(tmp_path)}')


def test_threads_key_pins_the_intra_op_threads(tmp_path):
    """OMP_NUM_THREADS differs by launcher (torchrun sets 1 only for several processes
    per node); ``randomness.threads`` makes it one number for every layout."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        runner = _runner(tmp_path / 'a', threads=1)
        assert torch.get_num_threads() == 1
        with open(runner.logger.log_file) as f:
            assert 'deterministic=False, diff_rank_seed=False, sample_seeding=True, threads=1' \
                in f.read()
        torch.set_num_threads(2)
        _runner(tmp_path / 'b')
        assert torch.get_num_threads() == 2  # no key: PyTorch's own count, untouched
    finally:
        torch.set_num_threads(before)


def _seed_line(tmp_path, name, **randomness):
    runner = Runner(model=Regressor(), work_dir=str(tmp_path / name),
                    randomness=dict(randomness), experiment_name=f'{name}-{id(tmp_path)}',
                    custom_hooks=[dict(type='ReproducibilityHook')])
    with open(runner.logger.log_file) as f:
        return re.search(r'mmrepro: seed \d+ \(([^)]*)\)', f.read()).group(0)


@pytest.fixture(autouse=True)
def _no_note():
    yield
    note_seed_source(None, 'config')


def test_the_log_names_where_the_seed_was_given(tmp_path):
    assert _seed_line(tmp_path, 'config', seed=5) == 'mmrepro: seed 5 (config)'
    note_seed_source(7, '--seed')
    assert _seed_line(tmp_path, 'cli', seed=7) == 'mmrepro: seed 7 (--seed)'
    note_seed_source(3, '--cfg-options randomness.seed')
    assert _seed_line(tmp_path, 'option', seed=3) == (
        'mmrepro: seed 3 (--cfg-options randomness.seed)')
    assert _seed_line(tmp_path, 'other', seed=4) == 'mmrepro: seed 4 (config)'  # not noted
    assert re.fullmatch(r'mmrepro: seed \d+ \(drawn on rank 0 and broadcast; pass it back '
                        r'with --seed to rerun\)', _seed_line(tmp_path, 'drawn'))
