"""runner.hooks: where a config asks for MMEngine's checkpoint or scheduler hook, a
ReproRunner builds mmrepro's, with the same arguments; another hook is kept and named."""
from __future__ import annotations

import glob
import os.path as osp

from mmengine.hooks import CheckpointHook, ParamSchedulerHook
from mmengine.registry import HOOKS
from mmengine.runner import Runner
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, installs the entry)

HOOK = [dict(type='ReproducibilityHook', trace_interval=0)]


@HOOKS.register_module(force=True)
class OwnCheckpointHook(CheckpointHook):
    """A team's checkpoint hook."""


def _hooks(work_dir, custom=(), **default_hooks):
    runner = Runner(**runner_kwargs(work_dir, [*HOOK, *custom], default_hooks=default_hooks))
    log = open(glob.glob(osp.join(str(work_dir), '*', '*.log'))[0]).read()
    return [h for h in runner.hooks if isinstance(h, (CheckpointHook, ParamSchedulerHook))], log


def test_mmengines_hooks_by_name_class_or_default_become_mmrepros(tmp_path):
    for name, entry in (('name', 'mmengine.CheckpointHook'), ('cls', CheckpointHook)):
        hooks, log = _hooks(tmp_path / name, checkpoint=dict(type=entry, interval=2,
                                                               max_keep_ckpts=1))
        assert [type(h).__name__ for h in hooks] == ['ReproParamSchedulerHook',
                                                      'ReproCheckpointHook']
        assert (hooks[1].interval, hooks[1].max_keep_ckpts) == (2, 1)
        assert 'mmrepro: default_hooks' not in log
    hooks, _ = _hooks(tmp_path / 'default')  # both left to MMEngine's defaults
    assert [type(h).__name__ for h in hooks] == ['ReproParamSchedulerHook',
                                                  'ReproCheckpointHook']
    assert hooks[1].interval == 1  # MMEngine's default


def test_custom_hooks_asking_for_mmengines_checkpoint_hook_get_mmrepros(tmp_path):
    custom = [dict(type='CheckpointHook', by_epoch=False, interval=10)]
    hooks, _ = _hooks(tmp_path, custom, checkpoint=None)
    assert [type(h).__name__ for h in hooks] == ['ReproParamSchedulerHook',
                                                  'ReproCheckpointHook']
    assert (hooks[1].interval, hooks[1].by_epoch) == (10, False)


def test_a_hook_of_ones_own_is_kept_and_the_log_says_what_it_lacks(tmp_path):
    hooks, log = _hooks(tmp_path, checkpoint=dict(type='OwnCheckpointHook', interval=1))
    assert [type(h).__name__ for h in hooks] == ['ReproParamSchedulerHook',
                                                  'OwnCheckpointHook']
    assert ('mmrepro: default_hooks.checkpoint is OwnCheckpointHook, not ReproCheckpointHook: '
            '`last_checkpoint` is written in place, not atomically') in log


def test_a_removed_default_hook_stays_removed(tmp_path):
    hooks, log = _hooks(tmp_path, checkpoint=None, param_scheduler=None)
    assert hooks == [] and 'mmrepro: default_hooks' not in log
