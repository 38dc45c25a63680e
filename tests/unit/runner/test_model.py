"""runner.model: a ReproRunner audits the model it builds, in deterministic mode only,
and replaces mmcv's RoIAlign there; a Runner without mmrepro keeps its model as built."""
from __future__ import annotations

import pytest
from mmengine.runner import Runner
from support.toy_runner import Regressor, runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.ops import DeterministicRoIAlign
from mmrepro.run.state import run_state

mmcv_ops = pytest.importorskip('mmcv.ops')

HOOK = dict(type='ReproducibilityHook', trace_interval=0)


class _WithRoI(Regressor):
    """The toy model holding mmcv layers its forward does not use."""

    def __init__(self, *layers) -> None:
        super().__init__()
        self.roi = mmcv_ops.RoIAlign(2, spatial_scale=0.5)
        for i, layer in enumerate(layers):
            self.add_module(f'extra{i}', layer)


def _runner(tmp_path, hooks, model=None, **randomness) -> Runner:
    return Runner(**runner_kwargs(tmp_path, hooks, model=model or _WithRoI(),
                                  randomness=dict(seed=3, **randomness)))


def test_deterministic_mode_replaces_roi_align_and_logs_the_audit(tmp_path):
    runner = _runner(tmp_path, [HOOK], deterministic=True)
    assert type(runner.model.roi) is DeterministicRoIAlign
    assert runner.model.roi.output_size == (2, 2) and runner.model.roi.spatial_scale == 0.5
    audit = run_state(runner).audit
    assert [(e['name'], e['type'], e['op'], e['action']) for e in audit] == [
        ('roi', 'RoIAlign', 'RoIAlign', 'replaced')]
    log = open(runner.logger.log_file).read()
    assert 'mmcv op audit: 1 module(s) backed by ops nondeterministic on CUDA' in log
    # The seed line set_randomness kept is logged first, once the logger exists.
    assert log.index('mmrepro: seed 3') < log.index('mmcv op audit')


def test_without_deterministic_mode_nothing_is_audited(tmp_path):
    runner = _runner(tmp_path, [HOOK])
    assert run_state(runner).settings.deterministic is False
    assert type(runner.model.roi) is mmcv_ops.RoIAlign and run_state(runner).audit == []
    assert 'mmcv op audit' not in open(runner.logger.log_file).read()


def test_a_runner_without_mmrepro_keeps_its_model(tmp_path):
    runner = _runner(tmp_path, [], deterministic=True)
    assert run_state(runner).settings is None
    assert type(runner.model.roi) is mmcv_ops.RoIAlign and run_state(runner).audit == []


def test_strict_refuses_an_op_without_replacement(tmp_path):
    model = _WithRoI(mmcv_ops.RoIPool(2, 0.5))
    with pytest.raises(ValueError, match=r'^deterministic=True and strict=True, but 1 '
                       r'module\(s\) use ops that are nondeterministic on CUDA: extra0 '
                       r'\(RoIPool: RoIPool, '):
        _runner(tmp_path, [HOOK], model=model, deterministic=True, strict=True)
    # Not strict: the run goes on, the audit lists the op that remains.
    runner = _runner(tmp_path / 'warn', [HOOK], model=_WithRoI(mmcv_ops.RoIPool(2, 0.5)),
                     deterministic=True)
    assert [(e['name'], e['action']) for e in run_state(runner).audit] == [
        ('roi', 'replaced'), ('extra0', 'nondeterministic-on-cuda')]
    assert ' - WARNING - mmcv op audit: 2 module(s)' in open(runner.logger.log_file).read()
