"""runner.loaders: a resumed train loader starts where the checkpoint stopped,
and only when the checkpoint's layout is this run's; explicit seeds win; a Runner that
did not enable mmrepro builds MMEngine's loaders."""
from __future__ import annotations

import glob
import os.path as osp

from mmengine.dataset import DefaultSampler
from mmengine.runner import Runner
from support.checkpoints import without_part_digests
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.resume.checkpoint_io import safe_load

#: Epoch checkpoints and one at iteration 10 (batch 2 of the second 8-batch epoch).
HOOKS = [dict(type='ReproducibilityHook'),
         dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]


def _resume(tmp_path, name, **changes):
    kwargs = runner_kwargs(tmp_path / name, HOOKS, resume=True,
                           load_from=str(tmp_path / 'full' / 'iter_10.pth'))
    runner = Runner(**{**kwargs, **changes})
    runner.train()
    log = open(glob.glob(osp.join(str(tmp_path / name), '*', '*.log'))[0]).read()
    return runner, log


def test_resume_on_another_batch_size_with_auto_scale_lr_restarts_the_epoch(tmp_path):
    """The log says the position is not restored; the loader must not be positioned
    from the checkpoint either (it was, from a peek taken before the section was
    checked): the resumed epoch runs all its batches, as MMEngine's resume does."""
    Runner(**runner_kwargs(tmp_path / 'full', HOOKS)).train()
    assert safe_load(str(tmp_path / 'full' / 'iter_10.pth'))['mmrepro']['position'] == dict(
        epoch=1, global_batches=2, global_batch=4)
    kwargs = runner_kwargs(tmp_path, HOOKS)
    loader = dict(kwargs['train_dataloader'], batch_size=2)  # 16 batches an epoch
    runner, log = _resume(tmp_path, 'halved', train_dataloader=loader,
                          auto_scale_lr=dict(enable=True, base_batch_size=4))
    assert ('mmrepro: per-rank batch size 4 -> 2; auto_scale_lr is enabled, so training '
            'continues, but RNG states and data position are not restored') in log
    assert 'mmrepro: resumed RNG states and data position' not in log
    # iteration 10 + the whole second epoch (16) + the third (16); positioned after 2
    # batches, the second epoch would have run 14
    assert runner.iter == 10 + 16 + 16


def test_resume_on_the_same_layout_starts_after_the_consumed_batches(tmp_path):
    Runner(**runner_kwargs(tmp_path / 'full', HOOKS)).train()
    runner, log = _resume(tmp_path, 'same')
    assert ('mmrepro: resumed RNG states and data position (sampler epoch 1, 2 batches '
            'done).') in log
    assert runner.iter == 24  # 3 epochs of 8 batches, as the uninterrupted run


def test_a_malformed_section_is_refused_before_the_loader_is_positioned(tmp_path):
    import pytest
    import torch

    from mmrepro.resume.checkpoint_io import CheckpointLoadError
    Runner(**runner_kwargs(tmp_path / 'full', HOOKS)).train()
    path = str(tmp_path / 'full' / 'iter_10.pth')
    checkpoint = safe_load(path)
    checkpoint['mmrepro']['format'] = 99  # another writer's section, without part digests
    torch.save(without_part_digests(checkpoint), path)
    with pytest.raises(CheckpointLoadError, match=r"The 'mmrepro' section of \S+iter_10\.pth "
                       r'is malformed \(format 99, this mmrepro reads format 1 or 2\)'):
        _resume(tmp_path, 'refused')


def test_a_loader_built_before_the_checkpoint_was_known_is_positioned_after_resume(
        tmp_path, monkeypatch):
    """A checkpoint not peeked at (a remote file): the section is validated when it is
    loaded, and the train loader, built before, is positioned after ``Runner.resume``
    (the epoch loop); an iteration loop's iterator has started: MMEngine replays."""
    from mmrepro.runner import randomness
    Runner(**runner_kwargs(tmp_path / 'full', HOOKS)).train()
    monkeypatch.setattr(randomness, '_peek_resume_checkpoint', lambda runner, settings: None)
    runner, log = _resume(tmp_path, 'late')
    assert ('mmrepro: resumed RNG states and data position (sampler epoch 1, 2 batches '
            'done).') in log
    assert runner.iter == 24  # 3 epochs of 8 batches, as the uninterrupted run
    assert runner.train_dataloader.batch_sampler.positioned_at((1, 2))


def test_an_iteration_loop_built_before_the_checkpoint_was_known_replays(
        tmp_path, monkeypatch):
    """Its iterator started its pass when the loop was built: the sampler is not
    positioned after ``Runner.resume``, and MMEngine's replay draws the trained batches."""
    from mmrepro.runner import randomness
    loader = runner_kwargs(tmp_path, HOOKS)['train_dataloader']
    iter_loop = dict(train_cfg=dict(type='IterBasedTrainLoop', max_iters=24),
                     train_dataloader=dict(loader, sampler=dict(type='InfiniteSampler')),
                     default_hooks=dict(checkpoint=None,
                                        logger=dict(type='LoggerHook', interval=100)))
    Runner(**runner_kwargs(tmp_path / 'full', HOOKS, **iter_loop)).train()
    monkeypatch.setattr(randomness, '_peek_resume_checkpoint', lambda runner, settings: None)
    runner, log = _resume(tmp_path, 'late', **iter_loop)
    assert ('mmrepro: the loader was built before the checkpoint was known; replaying the '
            'skipped batches instead.') in log
    assert not runner.train_dataloader.batch_sampler.positioned_at((0, 10))
    assert runner.iter == 24


class _Numbers:
    """A map-style dataset of 8 numbers."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return index


def _loader_cfg():
    return dict(dataset=_Numbers(), batch_size=2, num_workers=0,
                sampler=dict(type=DefaultSampler, shuffle=True))


def test_explicit_seed_wins_on_a_reprorunner(tmp_path):
    runner = Runner(**runner_kwargs(tmp_path, HOOKS, randomness=dict(seed=7)))
    assert type(runner).__name__ == 'ReproRunner' and runner.seed == 7
    assert runner.build_dataloader(_loader_cfg(), seed=123).sampler.seed == 123
    assert runner.build_dataloader(_loader_cfg(), seed=runner.seed).sampler.seed == 7
    loader = runner.build_dataloader(_loader_cfg())
    assert loader.sampler.seed == 7
    assert type(loader.batch_sampler).__name__ == 'RankBatchSampler'  # not the train loader


def test_plain_runner_is_mmengine(tmp_path):
    """Not enabled: build_dataloader is MMEngine's, on the class and on a Runner."""
    runner = Runner(**runner_kwargs(tmp_path, [], randomness=dict(seed=7)))
    assert type(runner) is Runner
    for build in (Runner.build_dataloader, runner.build_dataloader):
        loader = build(_loader_cfg(), seed=123)
        assert loader.sampler.seed == 123
        assert type(loader.batch_sampler).__name__ == 'BatchSampler'  # not rebuilt
