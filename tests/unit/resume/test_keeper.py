"""mmrepro.resume.keeper: what ResumeKeeper writes into checkpoints and puts back on resume.

Real toy Runners (32 samples, batch 4: 8 batches an epoch), checkpoints at iteration 10.
"""
from __future__ import annotations

import pytest
import torch
from mmengine.runner import Runner
from support.repro_utils import state_digest
from support.toy_runner import runner_kwargs

import mmrepro  # noqa: F401  (registers ReproRunner, as custom_imports would)
from mmrepro.resume.checkpoint_io import safe_load

HOOKS = [dict(type='ReproducibilityHook', trace_interval=0),
         dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False)]
#: The iteration loop over an infinite sampler: 24 iterations.
ITER_LOOP = dict(train_cfg=dict(type='IterBasedTrainLoop', max_iters=24),
                 default_hooks=dict(checkpoint=dict(type='CheckpointHook', by_epoch=False,
                                                    interval=10, save_last=True),
                                    logger=dict(type='LoggerHook', interval=100)))


def _train(work_dir, hooks=HOOKS, loader=None, **extra):
    kwargs = runner_kwargs(work_dir, hooks, **extra)
    if loader:
        kwargs['train_dataloader'] = dict(kwargs['train_dataloader'], **loader)
    runner = Runner(**kwargs)
    runner.train()
    return runner, open(runner.logger.log_file).read()


def _resume(tmp_path, name, checkpoint, **extra):
    return _train(tmp_path / name, resume=True, load_from=str(checkpoint), **extra)


def test_the_section_holds_seed_layout_position_and_one_rng_state(tmp_path):
    _train(tmp_path / 'full')
    section = safe_load(str(tmp_path / 'full' / 'iter_10.pth'))['mmrepro']
    assert (section['seed'], section['world_size'], section['batch_size'], section['loop']) \
        == (3, 1, 4, 'epoch')
    assert section['randomness']['deterministic'] is True and 'seed' not in section['randomness']
    assert section['position'] == dict(epoch=1, global_batches=2, global_batch=4)
    assert len(section['rng']) == 1 and set(section['rng'][0]) >= {'python', 'numpy', 'torch'}
    assert section['preprocessor'] == {}  # the toy model has no data preprocessor state
    # at the end of an epoch the next pass starts the next epoch at batch 0
    assert safe_load(str(tmp_path / 'full' / 'epoch_1.pth'))['mmrepro']['position'] == dict(
        epoch=1, global_batches=0, global_batch=4)


def test_an_iteration_loop_resumes_exactly(tmp_path):
    loader = dict(sampler=dict(type='InfiniteSampler', shuffle=True))
    _train(tmp_path / 'full', hooks=HOOKS[:1], loader=loader, **ITER_LOOP)
    section = safe_load(str(tmp_path / 'full' / 'iter_10.pth'))['mmrepro']
    assert section['loop'] == 'iter'
    assert section['position'] == dict(epoch=0, global_batches=10, global_batch=4)
    resumed, log = _resume(tmp_path, 'resumed', tmp_path / 'full' / 'iter_10.pth',
                           hooks=HOOKS[:1], loader=loader, **ITER_LOOP)
    assert 'mmrepro: resumed RNG states and data position (sampler epoch 0, 10 batches ' \
        'done).' in log
    assert resumed.iter == 24
    assert state_digest(str(tmp_path / 'resumed' / 'iter_24.pth')) == \
        state_digest(str(tmp_path / 'full' / 'iter_24.pth'))


def test_another_layout_of_the_same_global_batch_continues_in_its_micro_batches(tmp_path):
    _train(tmp_path / 'full')
    kwargs = runner_kwargs(tmp_path, HOOKS)
    resumed, log = _resume(tmp_path, 'acc2', tmp_path / 'full' / 'iter_10.pth',
                           loader=dict(batch_size=2),
                           optim_wrapper=dict(kwargs['optim_wrapper'], accumulative_counts=2))
    assert ('mmrepro: resuming on another layout (per-rank batch size 4 -> 2, '
            'accumulative_counts 1 -> 2) with the same global batch: the data stream '
            'continues exactly; iteration 10 of the checkpoint is iteration 20 here '
            '(2 micro-batch(es) per optimizer step).') in log
    assert ('mmrepro: resumed data position (sampler epoch 1, 4 batches done).') in log
    assert resumed.iter == 3 * 16  # 16 micro-batches an epoch, as if never stopped


def test_another_global_batch_is_refused_unless_auto_scale_lr_is_on(tmp_path):
    _train(tmp_path / 'full')
    with pytest.raises(ValueError, match=(
            r'the global batch differs\. Set train_dataloader\.batch_size x '
            r'optim_wrapper\.accumulative_counts to 4 for 1 rank\(s\)\. Or set '
            r'auto_scale_lr=dict\(enable=True, \.\.\.\) to continue without bitwise '
            r'reproducibility\.$')):
        _resume(tmp_path, 'halved', tmp_path / 'full' / 'iter_10.pth',
                loader=dict(batch_size=2))


def test_a_checkpoint_without_the_section_resumes_with_a_warning(tmp_path):
    _train(tmp_path / 'plain', hooks=HOOKS[1:])  # mmrepro not enabled: no section
    assert 'mmrepro' not in torch.load(str(tmp_path / 'plain' / 'iter_10.pth'),
                                       weights_only=False)
    resumed, log = _resume(tmp_path, 'resumed', tmp_path / 'plain' / 'iter_10.pth')
    assert ('mmrepro: the checkpoint being resumed has no mmrepro state (written without '
            'mmrepro?). Cannot restore: python/numpy/torch/CUDA RNG states of every rank; '
            'the data position inside an epoch (the epoch restarts at batch 0).') in log
    assert 'mmrepro: resumed' not in log
    assert resumed.iter == 10 + 8 + 8  # the resumed epoch runs all its batches


def test_without_sample_seeding_the_position_counts_the_ranks_batches(tmp_path):
    randomness = dict(seed=3, deterministic=True, sample_seeding=False)
    _train(tmp_path / 'full', randomness=randomness)
    section = safe_load(str(tmp_path / 'full' / 'iter_10.pth'))['mmrepro']
    assert section['position'] == dict(epoch=1, batches=2, unit='rank')
    resumed, log = _resume(tmp_path, 'resumed', tmp_path / 'full' / 'iter_10.pth',
                           randomness=randomness)
    assert 'mmrepro: sample seeding is off, so the data position is not restored.' in log
    assert resumed.iter == 10 + 8 + 8
