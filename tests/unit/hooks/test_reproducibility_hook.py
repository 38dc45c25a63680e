"""mmrepro.hooks.ReproducibilityHook: its arguments, and what it does in a real Runner."""
import os.path as osp

import pytest
import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import Runner
from support.toy_runner import runner_kwargs

from mmrepro import trace as T
from mmrepro.hooks import ReproducibilityHook
from mmrepro.record.run_record import load_run_record
from mmrepro.resume.checkpoint_io import safe_load
from mmrepro.rng.step_draws import seed_step, step_key


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(trace_interval=-1), ValueError,
     r'ReproducibilityHook\(trace_interval=-1\): expected an int >= 0 \(0 turns the trace '
     r'off; N traces optimizer steps 1, 2, 4, \.\.\. below N, then every N-th step\)\.'),
    (dict(trace_interval=True), ValueError, r'ReproducibilityHook\(trace_interval=True\)'),
    (dict(trace_forward=1), TypeError,
     r'ReproducibilityHook\(trace_forward=1\): expected True or False\.'),
])
def test_bad_hook_arguments_are_errors(kwargs, error, message):
    from mmrepro.hooks import ReproducibilityHook
    with pytest.raises(error, match=message):
        ReproducibilityHook(**kwargs)


class DrawProbe(Hook):
    """Draws from the global torch RNG where the model's forward would (after every
    other hook's ``before_train_iter``); keeps ``(iter, draw)``."""

    priority = 'LOWEST'

    def __init__(self) -> None:
        self.draws = []

    def before_train_iter(self, runner, batch_idx, data_batch=None) -> None:
        self.draws.append((runner.iter, float(torch.rand(()))))


@pytest.fixture(autouse=True)
def _probe_registered():
    HOOKS.register_module(module=DrawProbe, force=True)


def test_defaults_and_registry():
    hook = HOOKS.build(dict(type='ReproducibilityHook'))
    assert isinstance(hook, ReproducibilityHook)
    assert (hook.trace_interval, hook.trace_forward, hook.fingerprint) == (50, False, 'labels')
    assert hook.priority == 85  # after LoggerHook/ParamSchedulerHook, before CheckpointHook
    with pytest.raises(ValueError, match=r"ReproducibilityHook\(fingerprint='full'\)"):
        ReproducibilityHook(fingerprint='full')


def test_in_a_runner_it_traces_records_keys_draws_and_fills_checkpoints(tmp_path):
    hooks = [dict(type='ReproducibilityHook', trace_interval=4), dict(type='DrawProbe')]
    runner = Runner(**runner_kwargs(tmp_path, hooks))
    names = [type(h).__name__ for h in runner.hooks]
    assert names.index('ReproducibilityHook') < names.index('ReproCheckpointHook')
    runner.train()
    # the model's draws are keyed by (seed, optimizer step, slice): iteration i of 1 x 4
    probe = next(h for h in runner.hooks if isinstance(h, DrawProbe))
    assert len(probe.draws) == 24
    for iteration, draw in probe.draws:
        seed_step(step_key(3, iteration, 0, 1))
        assert float(torch.rand(())) == draw
    # the trace: dense early steps, then every 4th
    header, lines = T.read_trace(osp.join(runner.log_dir, T.TRACE_NAME))
    assert header['interval'] == 4
    assert [line['step'] for line in lines] == [1, 2, 4, 8, 12, 16, 20, 24]
    # the run record beside the log, and in every checkpoint with the mmrepro section
    record, _ = load_run_record(str(tmp_path))
    assert record['seed'] == 3 and record['world_size'] == 1
    checkpoint = safe_load(str(tmp_path / 'epoch_2.pth'))
    assert checkpoint['meta']['run_record']['seed'] == 3
    assert checkpoint['mmrepro']['position'] == dict(epoch=2, global_batches=0, global_batch=4)
    log = open(runner.logger.log_file).read()
    assert 'mmrepro: weights sha256 after iteration 24: ' in log


def test_trace_interval_0_writes_no_trace(tmp_path):
    runner = Runner(**runner_kwargs(tmp_path, [dict(type='ReproducibilityHook',
                                                    trace_interval=0)]))
    runner.train()
    assert not osp.exists(osp.join(runner.log_dir, T.TRACE_NAME))
    assert osp.exists(osp.join(runner.log_dir, 'run_record.json'))
