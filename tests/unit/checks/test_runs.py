"""mmrepro.checks.runs: a check run's config text, seed, command line, progress, work dir."""
from __future__ import annotations

import ast
import os
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
    logged_iteration,
    prepare_work_dir,
    previous_check,
    progress,
    remove_checkpoints,
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
    assert str(info.value) == (f'config {str(path)!r} has no optim_wrapper; mmrepro-check '
                               'needs a training config')
    path.write_text(path.read_text() + "optim_wrapper = dict(optimizer=dict(type='SGD'))\n")
    cfg = load_config(str(path), ['train_dataloader.batch_size=4'])
    assert cfg.train_dataloader.batch_size == 4


#: Lines of a check run's output, as MMEngine 0.10 logs them (epoch and iteration loops).
EPOCH_LINE = ('11/28 02:59:35 - mmengine - INFO - Epoch(train) [1][2/8]  lr: 1.0000e-02  '
              'eta: 0:00:08  time: 0.3619  data_time: 0.0155  loss: 1.7784  loss_cls: 1.1286')
ITER_LINE = ('11/28 02:59:35 - mmengine - INFO - Iter(train) [ 12/24]  lr: 1.0000e-02  '
             'eta: 0:00:08  time: 0.3619  data_time: 0.0155  loss: 0.5012  loss_cls: 0.4')


def test_logged_iteration_reads_the_loss_of_training_lines_only():
    assert logged_iteration(EPOCH_LINE) == '1.7784'
    assert logged_iteration(ITER_LINE) == '0.5012'
    assert logged_iteration('Epoch(train)  [ 10][100/270]  lr: 1.0e-02  time: 0.1') == ''
    assert logged_iteration(EPOCH_LINE.replace('(train)', '(val)')) is None
    assert logged_iteration('mmrepro: seed 0 (from the config); deterministic=True') is None
    assert logged_iteration('mmrepro-check: stopping after 2 iterations') is None


def test_progress_says_each_iteration_counted_on_from_the_start():
    said = []
    show = progress(lambda text, **kw: said.append((text, kw)), last=8, first=4)
    show(1, '1.7784')
    show(2, '')
    assert [kw for _, kw in said] == [dict(flush=True)] * 2
    texts = [text for text, _ in said]
    assert texts[0].startswith('  iteration 5/8: loss 1.7784 (') and texts[0].endswith(' s)')
    assert texts[1].startswith('  iteration 6/8 (') and texts[1].endswith(' s)')


def test_a_new_or_empty_work_dir_is_used_and_a_previous_check_replaced(tmp_path):
    said = []
    assert previous_check(str(tmp_path / 'new')) is False
    (tmp_path / 'empty').mkdir()
    assert previous_check(str(tmp_path / 'empty')) is False
    old = tmp_path / 'old'
    (old / 'run_a').mkdir(parents=True)
    (old / 'check_against_config.py').write_text('')
    (old / 'run_a' / 'iter_2.pth').write_bytes(b'x')
    assert previous_check(str(old)) is True
    prepare_work_dir(str(old), said.append)
    assert said == [f"  replacing {old}: a previous check's runs (name another --work-dir to "
                    'keep them)']
    assert os.listdir(old) == []
    prepare_work_dir(str(tmp_path / 'new'), said.append)
    assert osp.isdir(tmp_path / 'new') and len(said) == 1


def test_a_work_dir_holding_other_files_is_refused_and_left_alone(tmp_path):
    (tmp_path / 'epoch_1.pth').write_bytes(b'weights')
    (tmp_path / 'train.log').write_text('')
    with pytest.raises(ValueError) as info:
        prepare_work_dir(str(tmp_path), print)
    assert str(info.value) == (f"--work-dir {str(tmp_path)!r} holds files no check wrote (e.g. "
                               "'epoch_1.pth') and a check replaces its work dir; name a new "
                               'or empty directory')
    assert sorted(os.listdir(tmp_path)) == ['epoch_1.pth', 'train.log']
    with pytest.raises(ValueError) as info:
        previous_check(str(tmp_path / 'train.log'))
    assert str(info.value) == (f"--work-dir {str(tmp_path / 'train.log')!r} is a file; name a "
                               "new or empty directory, or a previous check's work dir")


def test_remove_checkpoints_keeps_those_asked_for_and_drops_stale_pointers(tmp_path):
    for run, size in (('run_a', 3), ('run_b', 5)):
        (tmp_path / run).mkdir()
        for it in (1, 2):
            (tmp_path / run / f'iter_{it}.pth').write_bytes(b'w' * size)
        (tmp_path / run / 'last_checkpoint').write_text(str(tmp_path / run / 'iter_2.pth'))
    keep = str(tmp_path / 'run_a' / 'iter_2.pth')
    assert remove_checkpoints(str(tmp_path), [keep]) == (3, 3 + 5 + 5)
    assert sorted(os.listdir(tmp_path / 'run_a')) == ['iter_2.pth', 'last_checkpoint']
    assert os.listdir(tmp_path / 'run_b') == []
    assert remove_checkpoints(str(tmp_path)) == (1, 3)
    assert os.listdir(tmp_path / 'run_a') == []
