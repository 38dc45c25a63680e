"""mmrepro.checks.runs: a check run's config text, seed and command line."""
from __future__ import annotations

import ast
import os.path as osp
import sys

import pytest
from mmengine.config import Config
from support.repro_utils import REPO

from mmrepro.checks.runs import (
    DEFAULT_SEED,
    Run,
    child_config,
    literal,
    load_config,
    seed_of,
    train_command,
)
from mmrepro.run.config import ConfigError


def test_literal_writes_plain_values_back_and_refuses_objects():
    value = dict(imports=['mmrepro'], size=(2, 3), flag=None, ratio=0.5)
    assert literal(value, 'custom_imports', 'c.py') == repr(value)
    assert ast.literal_eval(literal(value, 'custom_imports', 'c.py')) == value
    with pytest.raises(ValueError) as info:
        literal([dict(type=print)], 'custom_hooks', 'cfg.py')
    assert str(info.value) == ("custom_hooks of 'cfg.py' are not plain values "
                               "([{'type': <built-in function print>}]); mmrepro cannot "
                               'rewrite them')


def test_seed_of_is_the_configs_or_the_default():
    assert seed_of(Config(dict(randomness=dict(seed=7)))) == 7
    assert seed_of(Config(dict(randomness=dict(seed=0)))) == 0
    assert seed_of(Config(dict(randomness=dict(deterministic=True)))) == DEFAULT_SEED == 0
    assert seed_of(Config(dict())) == DEFAULT_SEED


def test_train_command_runs_tools_train_py_with_the_run_s_arguments():
    run = Run('resume', 'resumed from iteration 2', args=['--resume', 'iter_2.pth'],
              cfg_options=['train_dataloader.num_workers=2'])
    command = train_command('child.py', '/w/resume', run, ['randomness.seed=3'])
    assert command == [sys.executable, osp.join(REPO, 'tools', 'train.py'), 'child.py',
                       '--work-dir', '/w/resume', '--resume', 'iter_2.pth', '--cfg-options',
                       'randomness.seed=3', 'train_dataloader.num_workers=2']
    plain = train_command('child.py', '/w/a', Run('run_a', 'first'), [])
    assert plain[-3:] == ['child.py', '--work-dir', '/w/a']  # no --cfg-options at all


def test_train_command_with_processes_launches_torchrun():
    command = train_command('child.py', '/w/a', Run('run_a', 'first'), [], nproc=2)
    assert command[:4] == [sys.executable, '-m', 'torch.distributed.run',
                           '--nproc_per_node=2']
    assert command[4].startswith('--master_port=') and int(command[4].split('=')[1]) > 0
    assert command[5:] == [osp.join(REPO, 'tools', 'train.py'), 'child.py', '--work-dir',
                           '/w/a', '--launcher', 'pytorch']


def test_child_config_inherits_the_users_and_enables_tracing_and_the_stop(tmp_path):
    user = tmp_path / 'user.py'
    user.write_text("model = dict(type='M')\n")
    cfg = Config(dict(custom_hooks=[dict(type='ReproducibilityHook', trace_interval=9),
                                    dict(type='EMAHook')],
                      custom_imports=dict(imports=['mine'])))
    text = child_config(cfg, str(user), 'check_repro', 'run_a: the first run',
                        dict(trace_interval=1), stop_iter=6, ckpt_interval=3,
                        randomness=dict(seed=0))
    assert text.startswith(f'# Written by mmrepro\'s check_repro: {user}\n'
                           '# run_a: the first run\n')
    child = tmp_path / 'child.py'
    child.write_text(text)
    loaded = Config.fromfile(str(child), import_custom_modules=False)
    assert loaded.model == dict(type='M')  # inherited
    assert loaded.custom_hooks == [dict(type='ReproducibilityHook', trace_interval=1),
                                   dict(type='EMAHook'),
                                   dict(type='CheckReproStopHook', max_iters=6)]
    assert loaded.custom_imports == dict(imports=['mine', 'mmrepro'],
                                         allow_failed_imports=False)
    assert loaded.default_hooks.checkpoint.interval == 3
    assert loaded.default_hooks.checkpoint.by_epoch is False
    assert loaded.randomness == dict(seed=0) and loaded.val_dataloader is None


def test_load_config_needs_a_training_config(tmp_path):
    path = tmp_path / 'c.py'
    path.write_text("model = dict(type='M')\ntrain_dataloader = dict(batch_size=2)\n")
    with pytest.raises(ConfigError) as info:
        load_config(str(path), [])
    assert str(info.value) == (f'config {str(path)!r} has no optim_wrapper; check_repro needs '
                               'a training config')
    path.write_text(path.read_text() + "optim_wrapper = dict(optimizer=dict(type='SGD'))\n")
    cfg = load_config(str(path), ['train_dataloader.batch_size=4'])
    assert cfg.train_dataloader.batch_size == 4
