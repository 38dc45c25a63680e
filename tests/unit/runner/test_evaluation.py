"""runner.evaluation: which loops and loaders get evaluation batches that do not depend on
the number of ranks, what the log says otherwise, and the ranks' results in one rank's
order (2 and 3 real gloo processes); a run that only tests is recorded as one, without
building training."""
from __future__ import annotations

import glob
import json
import os.path as osp
from typing import List

import pytest
import torch
from mmengine.hooks import Hook
from mmengine.registry import HOOKS, LOOPS
from mmengine.runner import Runner, TestLoop, ValLoop
from support.spawn_workers import IndexMetric, share_results_worker, spawn_ranks
from support.toy_runner import evaluating_kwargs, fake_runner, runner_kwargs
from torch.utils.data import BatchSampler, DataLoader

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.data import EvalBatchSampler, RankBatchSampler
from mmrepro.resume.checkpoint_io import safe_load
from mmrepro.resume.digests import weights_digest
from mmrepro.runner.evaluation import ReproTestLoop, ReproValLoop, build_eval_loop

HOOK = [dict(type='ReproducibilityHook', trace_interval=0)]


class IndexedData:
    """7 inputs; each sample's ``data_samples`` is its index."""

    def __len__(self) -> int:
        return 7

    def __getitem__(self, index: int) -> dict:
        return dict(inputs=torch.full((4,), index / 7.0), data_samples=index)


class OwnValLoop(ValLoop):
    """A team's validation loop."""


class OwnTestLoop(TestLoop):
    """A team's test loop."""


class EvalProbe(Hook):
    """Keeps every evaluation hook call with its arguments (indices for batches)."""

    def __init__(self) -> None:
        self.calls: List[tuple] = []

    def _batch(self, name, batch_idx, data_batch, outputs=None):
        indices = data_batch['data_samples'].tolist()
        self.calls.append((name, batch_idx, indices,
                           None if outputs is None else outputs.flatten().tolist()))

    def before_val(self, runner):
        self.calls.append(('before_val',))

    def before_val_epoch(self, runner):
        self.calls.append(('before_val_epoch',))

    def before_val_iter(self, runner, batch_idx, data_batch=None):
        self._batch('before_val_iter', batch_idx, data_batch)

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self._batch('after_val_iter', batch_idx, data_batch, outputs)

    def after_val_epoch(self, runner, metrics=None):
        self.calls.append(('after_val_epoch', metrics))

    def after_val(self, runner):
        self.calls.append(('after_val',))


@pytest.fixture(autouse=True)
def _registered():
    LOOPS.register_module(module=OwnValLoop, force=True)
    LOOPS.register_module(module=OwnTestLoop, force=True)
    HOOKS.register_module(module=EvalProbe, force=True)


def _loader(**extra):
    return {**dict(dataset=IndexedData(), batch_size=2, num_workers=0,
                   sampler=dict(type='DefaultSampler', shuffle=False),
                   collate_fn=dict(type='default_collate')), **extra}


def _runner(work_dir, hooks=HOOK, val_cfg=None, test_cfg=None, loader=None):
    loader = loader or _loader()
    return Runner(**runner_kwargs(
        work_dir, hooks, val_dataloader=loader, val_evaluator=dict(type=IndexMetric),
        val_cfg=dict() if val_cfg is None else val_cfg, test_dataloader=loader,
        test_evaluator=dict(type=IndexMetric), test_cfg=dict() if test_cfg is None else test_cfg))


def _log(work_dir) -> str:
    return open(glob.glob(osp.join(str(work_dir), '*', '*.log'))[0]).read()


@pytest.mark.parametrize('kind', [None, 'ValLoop', 'mmengine.ValLoop', ValLoop])
def test_mmengines_loops_are_mmrepros(tmp_path, kind):
    test_kind = None if kind is None else {ValLoop: TestLoop}.get(
        kind, str(kind).replace('Val', 'Test'))
    runner = _runner(tmp_path, val_cfg={} if kind is None else dict(type=kind),
                     test_cfg={} if test_kind is None else dict(type=test_kind))
    assert type(runner.val_loop) is ReproValLoop and type(runner.test_loop) is ReproTestLoop
    for loop in (runner.val_loop, runner.test_loop):
        assert isinstance(loop.eval_batches, EvalBatchSampler)
        assert isinstance(loop.dataloader.batch_sampler, RankBatchSampler)  # keyed by mmrepro
        assert loop.dataloader.batch_sampler.batch_sampler is loop.eval_batches
        assert [list(map(int, b)) for b in loop.dataloader.batch_sampler] == [
            [0, 1], [2, 3], [4, 5], [6]]
    assert 'mmrepro: the val loop' not in _log(tmp_path)


def test_a_loop_of_another_type_is_kept_and_the_log_says_what_it_lacks(tmp_path):
    runner = _runner(tmp_path, val_cfg=dict(type='OwnValLoop'),
                     test_cfg=dict(type='OwnTestLoop'))
    assert type(runner.val_loop) is OwnValLoop and type(runner.test_loop) is OwnTestLoop
    log = _log(tmp_path)
    for stage, mine, theirs in (('val', 'ReproValLoop', 'OwnValLoop'),
                                ('test', 'ReproTestLoop', 'OwnTestLoop')):
        assert (f"mmrepro: the {stage} loop is {theirs}, not {mine}: with batch_size > 1 an "
                "image's padding, and so its predictions, can change with the number of "
                'ranks') in log


@pytest.mark.parametrize('extra,problem', [
    (dict(sampler=dict(type='DefaultSampler', shuffle=True)),
     'shuffles (DefaultSampler without shuffle=False)'),
    (dict(sampler=dict(type='DefaultSampler')), 'shuffles (DefaultSampler without shuffle=False)'),
    (dict(drop_last=True), 'drops a short last batch (drop_last=True)'),
    (dict(batch_sampler=dict(type=BatchSampler, drop_last=False)),
     'has a batch_sampler of its own (BatchSampler)'),
])
def test_a_loader_of_another_kind_keeps_its_batches_and_the_log_says_so(tmp_path, extra,
                                                                         problem):
    runner = _runner(tmp_path, loader=_loader(**extra))
    assert type(runner.val_loop) is ReproValLoop and runner.val_loop.eval_batches is None
    runner.val()
    assert (f'mmrepro: val_dataloader {problem}, so it keeps its batches: with batch_size > 1 '
            "an image's padding, and so its predictions, can change with the number of "
            'ranks') in _log(tmp_path)


def test_a_dataloader_object_is_kept_and_the_log_says_so(tmp_path):
    runner = _runner(tmp_path, loader=DataLoader(IndexedData(), batch_size=2))
    assert runner.val_loop.eval_batches is None
    assert ('mmrepro: val_dataloader is a DataLoader object, not a config, so it keeps its '
            'batches') in _log(tmp_path)


def test_one_rank_runs_exactly_mmengines_loop(tmp_path):
    """Same batches, hook calls (arguments and outputs), results and metrics."""
    seen = {}
    for name, val_cfg in (('mmengine', dict(type='OwnValLoop')), ('mmrepro', {})):
        torch.manual_seed(0)  # the same weights: the toy model is made before the seed
        runner = _runner(tmp_path / name, hooks=[*HOOK, dict(type='EvalProbe')],
                         val_cfg=val_cfg)
        metrics = runner.val()
        probe = next(h for h in runner.hooks if isinstance(h, EvalProbe))
        seen[name] = (metrics, probe.calls, runner.val_loop.evaluator.metrics[0].seen)
    assert seen['mmrepro'] == seen['mmengine']
    metrics, calls, results = seen['mmrepro']
    assert metrics == dict(samples=7.0) and [i for i, _ in results] == list(range(7))
    assert [c[2] for c in calls if c[0] == 'after_val_iter'] == [[0, 1], [2, 3], [4, 5], [6]]


def test_a_runner_mmrepro_does_not_act_for_gets_the_loop_as_configured():
    built = []
    runner = fake_runner()  # no settings: not enabled, and no logger to log with
    for stage in ('val', 'test'):
        loop = dict(type='ValLoop')
        assert build_eval_loop(runner, stage, loop, lambda cfg: built.append(cfg) or 'x') == 'x'
        assert built.pop() is loop



@pytest.mark.parametrize('world_size,size,batch_size', [(2, 8, 2), (3, 7, 2)])
def test_ranks_results_reach_the_metrics_in_one_ranks_order(tmp_path, world_size, size,
                                                            batch_size):
    results = spawn_ranks(share_results_worker, world_size, str(tmp_path / 'store'),
                          world_size, size, batch_size, str(tmp_path))
    one_rank = [(i, i * 10.0) for i in range(size)]
    found, wrapped = results[(0, False)]
    assert found == [one_rank, one_rank] and not wrapped  # the instance's wrapper removed
    # One entry per batch: every rank refuses, in the same words.
    errors = {results[(r, True)][0] for r in range(world_size)}
    first = EvalBatchSampler(range(size), batch_size, size=size, world_size=world_size)
    assert errors == {
        f'mmrepro: IndexMetric.results holds {len(first)} entries on rank 0, expected one '
        f'per sample that rank evaluated ({len(first.indices())}), to order them as on one '
        'rank; fix: append one result per data sample in its process(), or evaluate on one '
        'rank.'}
    assert not any(results[(r, True)][1] for r in range(world_size))


# ------------------------------------------------------------ runs that only evaluate
def test_a_test_run_writes_test_record_with_checkpoint_and_metrics(tmp_path):
    Runner(**runner_kwargs(tmp_path / 'train', [dict(type='ReproducibilityHook')])).train()
    ckpt = str(tmp_path / 'train' / 'epoch_3.pth')
    runner = Runner(**evaluating_kwargs(tmp_path / 'test', ckpt))
    metrics = runner.test()
    assert not hasattr(runner._train_loop, 'run')  # the train loop was never built
    (path,) = glob.glob(str(tmp_path / 'test' / '*' / 'test_record.json'))
    assert not glob.glob(str(tmp_path / 'test' / '*' / 'run_record.json'))
    with open(path) as f:
        record = json.load(f)
    assert record['run'] == 'test' and 'weights' not in record
    assert record['checkpoint']['weights_sha256'] == weights_digest(safe_load(ckpt))
    assert record['checkpoint']['iter'] == 24 and record['checkpoint']['file'] == ckpt
    (entry,) = record['evaluation']
    assert entry['kind'] == 'test' and entry['iter'] == 24 and entry['epoch'] == 3
    assert entry['metrics'] == {'mean_output': metrics['mean_output']}
    assert record['data']['dataset'] == 'NoisyData'  # the tested data's fingerprint
    assert osp.isfile(osp.join(osp.dirname(path), 'predictions.jsonl'))


def test_training_keeps_its_run_record(tmp_path):
    Runner(**runner_kwargs(tmp_path, [dict(type='ReproducibilityHook')],
                           train_cfg=dict(by_epoch=True, max_epochs=1))).train()
    (path,) = glob.glob(str(tmp_path / '*' / 'run_record.json'))
    with open(path) as f:
        record = json.load(f)
    assert 'run' not in record and 'checkpoint' not in record
