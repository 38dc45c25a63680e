"""mmrepro.hooks.CheckReproStopHook: a check's run ends after ``max_iters`` iterations,
its checkpoint and trace written and its hooks' ``after_run`` called, with status 0."""
import os.path as osp

import pytest
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import Runner
from support.toy_runner import runner_kwargs

from mmrepro import trace as T
from mmrepro.hooks.check_repro_stop_hook import CheckReproStopHook


class RunEndProbe(Hook):
    """Keeps the iteration at which ``after_run`` was called."""

    def __init__(self) -> None:
        self.ended_at = None

    def after_run(self, runner) -> None:
        self.ended_at = runner.iter


@pytest.fixture(autouse=True)
def _probe_registered():
    HOOKS.register_module(module=RunEndProbe, force=True)


def test_the_run_stops_after_max_iters_with_status_0(tmp_path):
    hooks = [dict(type='ReproducibilityHook', trace_interval=1),
             dict(type='CheckpointHook', by_epoch=False, interval=5, save_last=False),
             dict(type='RunEndProbe'), dict(type='CheckReproStopHook', max_iters=5)]
    runner = Runner(**runner_kwargs(tmp_path, hooks))
    names = [type(h).__name__ for h in runner.hooks]
    assert names[-1] == 'CheckReproStopHook'  # LOWEST: runs after the checkpoint is saved
    with pytest.raises(SystemExit) as stop:
        runner.train()
    assert stop.value.code == 0
    assert runner.iter == 4  # the fifth iteration (0-based 4) was the last
    assert osp.isfile(tmp_path / 'iter_5.pth') and not osp.exists(tmp_path / 'epoch_1.pth')
    probe = next(h for h in runner.hooks if isinstance(h, RunEndProbe))
    assert probe.ended_at == 4  # after_run ran: the hooks finished the run
    header, lines = T.read_trace(osp.join(runner.log_dir, T.TRACE_NAME))
    assert [line['iter'] for line in lines] == [1, 2, 3, 4, 5] and not header.get('truncated')
    assert 'mmrepro-check: stopping after 5 iterations' in open(runner.logger.log_file).read()


def test_it_counts_resumed_iterations_too(tmp_path):
    assert HOOKS.get('CheckReproStopHook') is CheckReproStopHook
    hooks = [dict(type='ReproducibilityHook', trace_interval=0),
             dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]
    Runner(**runner_kwargs(tmp_path / 'full', hooks)).train()
    runner = Runner(**runner_kwargs(
        tmp_path / 'resumed', [*hooks, dict(type='RunEndProbe'),
                               dict(type='CheckReproStopHook', max_iters=12)],
        resume=True, load_from=str(tmp_path / 'full' / 'iter_10.pth')))
    with pytest.raises(SystemExit):
        runner.train()
    # resumed at iteration 10: two more iterations make 12
    assert next(h for h in runner.hooks if isinstance(h, RunEndProbe)).ended_at == 11
    assert CheckReproStopHook(max_iters=13).after_train_iter(runner, 0) is None  # 12 < 13
