"""runner.model: a ReproRunner audits the model it builds, in deterministic mode only,
and replaces mmcv's RoIAlign there; a Runner without mmrepro keeps its model as built."""
from __future__ import annotations

import pytest
import torch
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


#: The toy's SGD in its foreach form, which torch 2.1's dynamo traces (it cannot trace the
#: single-tensor form's first momentum step).
FOREACH_SGD = dict(optimizer=dict(type='SGD', lr=0.05, momentum=0.9, foreach=True))


def _compiled(tmp_path, compile_cfg, hooks=(HOOK,), **kwargs) -> Runner:
    """The toy Runner whose config compiles ``train_step`` (MMEngine's ``compile``;
    None: eager), its model's initial weights drawn from seed 0."""
    torch.manual_seed(0)
    return Runner(**runner_kwargs(tmp_path, list(hooks), cfg=dict(compile=compile_cfg),
                                  optim_wrapper=FOREACH_SGD, **kwargs))


def test_a_compiled_run_trains_as_the_eager_one_and_says_what_it_set(tmp_path):
    """aot_eager runs eager's kernels: the same weights, compiled or not; the record and
    the log say it compiled. A ReproRunner's train_step is MMEngine's compiled one."""
    from support.repro_utils import state_digest

    from mmrepro.determinism.compile import _inductor_config
    runner = _compiled(tmp_path / 'compiled', dict(backend='aot_eager'),
                       train_cfg=dict(by_epoch=True, max_epochs=1))
    runner.train()
    eager = _compiled(tmp_path / 'eager', None, train_cfg=dict(by_epoch=True, max_epochs=1))
    eager.train()
    assert state_digest(str(tmp_path / 'compiled' / 'epoch_1.pth')) == state_digest(
        str(tmp_path / 'eager' / 'epoch_1.pth'))
    assert hasattr(runner.model.train_step, '_torchdynamo_orig_callable')
    log = open(runner.logger.log_file).read()
    assert "mmrepro: compile: backend aot_eager, mode default; mmrepro's hooks run outside " \
        'the compiled graphs' in log
    assert 'inductor' not in log.split('mmrepro: compile: ', 1)[1].split('\n')[0]
    record = runner.hooks[[type(h).__name__ for h in runner.hooks].index(
        'ReproducibilityHook')]._recorder.record
    assert record['compile']['enabled'] is True and record['compile']['backend'] == 'aot_eager'
    assert 'compile' not in eager.hooks[[type(h).__name__ for h in eager.hooks].index(
        'ReproducibilityHook')]._recorder.record
    assert _inductor_config().fallback_random is False  # aot_eager: nothing set


def test_inductor_settings_are_set_and_logged_before_mmengine_compiles(tmp_path, monkeypatch):
    from mmrepro.determinism import compile as C
    applied = []
    monkeypatch.setattr('mmrepro.runner.model.apply_settings', applied.extend)
    compiled = []
    monkeypatch.setattr(Runner, '_maybe_compile', lambda self, target: compiled.append(
        (target, list(applied))))
    runner = _compiled(tmp_path, True, randomness=dict(seed=3, deterministic=True))
    runner._maybe_compile('train_step')
    assert compiled == [('train_step', applied)] and applied  # set first, then compiled
    assert [key for key, _, _ in applied] == [key for key, _, _ in C.requirements(
        {}, True, False).sets]
    log = open(runner.logger.log_file).read()
    assert 'mmrepro: compile: inductor fallback_random=True: the model\'s random numbers ' \
        "are eager's" in log


def test_cuda_graphs_are_refused_in_one_line(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from mmrepro.runner.model import prepare_compile
    runner = _compiled(tmp_path, dict(mode='reduce-overhead'),
                       randomness=dict(seed=3, deterministic=True))
    monkeypatch.setattr(runner.model, 'parameters', lambda: iter([SimpleNamespace(
        is_cuda=True)]))
    with pytest.raises(ValueError, match=r"^compile: mode='reduce-overhead' \(CUDA graphs\): "
                       r'.*; use mode=\'default\''):
        prepare_compile(runner)
