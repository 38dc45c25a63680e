"""Exact resume: resumed runs end byte-identical to the uninterrupted one."""
import hashlib
import os
import os.path as osp
import shutil
import signal
import subprocess
import sys

import pytest
import torch
from support.checkpoints import without_part_digests
from support.repro_utils import (
    ITER_LOOP,
    REPO,
    RUN_CWD,
    checkpoint,
    iter_loop,
    losses,
    pythonpath,
    run_train,
    state_digest,
    train_log,
    write_config,
)

from mmrepro.resume.checkpoint_io import safe_load

pytestmark = pytest.mark.slow

def _resume(runs, tmp_path, model, ckpt, extra='', **kw):
    config = write_config(str(tmp_path / 'cfg.py'), model, runs.data_root, extra=extra, **kw)
    work_dir = str(tmp_path / 'resumed')
    proc = run_train(config, work_dir, '--resume', ckpt)
    return work_dir, proc.stdout + proc.stderr


@pytest.mark.parametrize('model, name', [
    pytest.param('retinanet', 'epoch_1.pth', marks=pytest.mark.full),
    pytest.param('retinanet', 'epoch_2.pth', marks=pytest.mark.floor),
    pytest.param('retinanet', 'iter_10.pth', marks=pytest.mark.floor),
    pytest.param('retinanet', 'iter_20.pth', marks=pytest.mark.full),
    pytest.param('faster_rcnn', 'epoch_1.pth', marks=pytest.mark.full),
    pytest.param('faster_rcnn', 'epoch_2.pth', marks=pytest.mark.full),
    pytest.param('faster_rcnn', 'iter_10.pth', marks=pytest.mark.floor)])
def test_resume_from_every_checkpoint_is_exact(runs, tmp_path, model, name):
    """The default run resumes each detector mid-epoch (``iter_10.pth``) and RetinaNet at
    an epoch's end (``epoch_2.pth``); the other checkpoints, a second proof of each kind,
    are the full tier's sweep."""
    base = runs.get(model, 'base')
    work_dir, out = _resume(runs, tmp_path, model, checkpoint(base, name))
    assert 'mmrepro: resumed RNG states and data position' in out
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))
    resumed_iters = losses(train_log(work_dir))
    assert resumed_iters and resumed_iters == losses(train_log(base))[-len(resumed_iters):]


def test_mid_epoch_resume_numbers_batches_like_the_original(runs, tmp_path):
    base = runs.get('retinanet', 'base')
    work_dir, _ = _resume(runs, tmp_path, 'retinanet', checkpoint(base, 'iter_10.pth'))
    first = train_log(work_dir)[0]
    assert first['iter'] == 11 and first['epoch'] == 2


@pytest.mark.parametrize('name', [  # iter_16: the full tier, a second iteration-loop case
    'iter_8.pth', pytest.param('iter_16.pth', marks=pytest.mark.full)])
def test_iteration_loop_resume_is_exact(runs, tmp_path, name):
    base = runs.get('retinanet', 'iterloop', extra=ITER_LOOP)
    work_dir, out = _resume(runs, tmp_path, 'retinanet', checkpoint(base, name),
                            extra=ITER_LOOP)
    assert 'Advance dataloader' in out  # MMEngine's replay loop ran, but was absorbed
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))


#: The iteration loop over a finite sampler, which MMEngine restarts every 8 iterations.
FINITE_LOOP = iter_loop('DefaultSampler', max_iters=12, milestone=8, interval=10)


def test_iteration_loop_with_a_finite_sampler_resumes_exactly(runs, tmp_path):
    """Resumed after the loop restarted the sampler: MMEngine replays the batches."""
    base = runs.get('retinanet', 'iterloop-finite', extra=FINITE_LOOP)
    work_dir, out = _resume(runs, tmp_path, 'retinanet', checkpoint(base, 'iter_10.pth'),
                            extra=FINITE_LOOP)
    assert 'Advance dataloader 10 steps' in out and 'Reach the end of the dataloader' in out
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))


#: The hooks of every test config (repro_utils.write_config), then one that SIGKILLs the
#: run's process group (the run and its dataloader workers) after iteration ``at_iter``.
KILL_HOOK = """
custom_imports = dict(imports=['mmrepro', 'support.rank_probe_hook'], allow_failed_imports=False)
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False),
                dict(type='KillRankHook', rank=0, at_iter={at_iter}, group=True)]
"""
#: kill_after -> (the iteration after which the run kills itself, its checkpoints by then).
#: The run saves epoch_1.pth after iteration 8, iter_10.pth, epoch_2.pth after 16,
#: iter_20.pth, epoch_3.pth: each kill lands mid-epoch, some iterations after the last one.
KILLS = {1: (9, ['epoch_1.pth']), 2: (13, ['epoch_1.pth', 'iter_10.pth'])}


@pytest.mark.parametrize('kill_after', [  # 2: the full tier, a second kill point
    pytest.param(1, marks=pytest.mark.floor), pytest.param(2, marks=pytest.mark.full)])
def test_sigkill_then_resume_auto_is_exact(runs, tmp_path, kill_after):
    """Kill -9 once `kill_after` checkpoints exist, then `--resume` in the same work_dir.

    The run kills itself (KillRankHook, tests/support/rank_probe_hook.py) at a set iteration after
    its `kill_after`-th checkpoint: the kill is placed by the run's progress, not a clock.
    """
    base = runs.get('retinanet', 'base')
    at_iter, saved = KILLS[kill_after]
    config = write_config(str(tmp_path / 'cfg.py'), 'retinanet', runs.data_root,
                          extra=KILL_HOOK.format(at_iter=at_iter))
    work_dir = str(tmp_path / 'killed')
    env = {'PYTHONPATH': pythonpath(osp.join(REPO, 'tests'))}  # rank_probe_hook
    cmd = [sys.executable, osp.join(REPO, 'tools', 'train.py'), config, '--work-dir',
           work_dir]
    log_path = tmp_path / 'killed.log'
    with open(log_path, 'w') as log:
        # A session of its own: the group the hook kills holds this run and nothing else.
        proc = subprocess.Popen(cmd, cwd=RUN_CWD, env={**os.environ, **env}, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=900)  # only bounds the wait for the kill
        finally:
            if proc.poll() is None:  # timed out or interrupted: end what this test started
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert returncode == -signal.SIGKILL, (
        f'the run was not killed (exit status {returncode}):\n'
        f'{log_path.read_text()[-5000:]}')
    assert osp.exists(osp.join(work_dir, 'killed-rank0'))
    assert sorted(f for f in os.listdir(work_dir) if f.endswith('.pth')) == sorted(saved)
    latest = checkpoint(work_dir)
    assert osp.basename(latest) == saved[-1]
    proc = run_train(config, work_dir, '--resume', env=env)
    out = proc.stdout + proc.stderr
    assert f'Auto resumed from the latest checkpoint {latest}.' in out
    assert 'mmrepro: resumed RNG states and data position' in out
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))


def test_checkpoint_without_mmrepro_state_resumes_with_warning(runs, tmp_path):
    ckpt = safe_load(checkpoint(runs.get('retinanet', 'base'), 'epoch_2.pth'))
    del ckpt['mmrepro']
    plain = str(tmp_path / 'plain.pth')
    torch.save(without_part_digests(ckpt, weights_too=True), plain)  # as MMEngine saves
    work_dir, out = _resume(runs, tmp_path, 'retinanet', plain)
    assert ('the checkpoint being resumed has no mmrepro state (written without mmrepro?). '
            'Cannot restore: python/numpy/torch/CUDA RNG states of every rank') in out
    assert (f'mmrepro: {plain} holds no digests (written without mmrepro, or by an earlier '
            'release): its weights, optimizer state, parameter scheduler state and training '
            'position (epoch, iteration, seed) could not be verified; loaded as it is.') in out
    assert osp.exists(osp.join(work_dir, 'epoch_3.pth'))


def test_a_format_1_checkpoint_of_the_previous_release_resumes_exactly(runs, tmp_path):
    """Releases before the section's format 2 kept the position in the rank's own batches."""
    base = runs.get('retinanet', 'base')
    ckpt = safe_load(checkpoint(base, 'iter_10.pth'))
    section = ckpt['mmrepro']
    position = section['position']
    assert section['format'] == 2 and position['global_batches'] > 0  # mid-epoch, 1 x 1
    section.update(format=1, position=dict(epoch=position['epoch'],
                                           batches=position['global_batches']))
    old = str(tmp_path / 'format_1.pth')
    torch.save(without_part_digests(ckpt), old)  # that release digested the weights alone
    work_dir, out = _resume(runs, tmp_path, 'retinanet', old)
    assert (f'mmrepro: {old}: weights match the digests saved with it; its optimizer state, '
            'parameter scheduler state, mmrepro section (RNG states, data position) and '
            'training position (epoch, iteration, seed) could not be verified (saved without '
            'their digests, by an earlier mmrepro).') in out
    assert 'mmrepro: resumed RNG states and data position' in out
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))


def _tree_digest(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = osp.join(dirpath, name)
            out[osp.relpath(path, root)] = hashlib.sha256(open(path, 'rb').read()).hexdigest()
    return out


@pytest.mark.parametrize('damage, match', [
    ('truncate', r'cannot be read .*probably truncated'),
    ('tamper', r'holds an object mmrepro does not load'),
])
def test_damaged_checkpoint_fails_clearly_and_overwrites_nothing(runs, tmp_path, damage,
                                                                  match):
    work_dir = str(tmp_path / 'work')
    shutil.copytree(runs.get('retinanet', 'base'), work_dir)
    target = osp.join(work_dir, 'epoch_2.pth')
    if damage == 'truncate':
        data = open(target, 'rb').read()
        open(target, 'wb').write(data[: len(data) // 2])
    else:
        ckpt = safe_load(target)
        ckpt['meta']['payload'] = os.system  # an arbitrary global, refused by weights_only
        torch.save(ckpt, target)
    before = _tree_digest(work_dir)
    config = write_config(str(tmp_path / 'cfg.py'), 'retinanet', runs.data_root)
    proc = run_train(config, work_dir, '--resume', target, check=False)
    assert proc.returncode != 0
    assert __import__('re').search(match, proc.stderr), proc.stderr[-2000:]
    after = _tree_digest(work_dir)
    assert {k: v for k, v in after.items() if k in before} == before


def test_batch_size_change_is_refused(runs, tmp_path):
    config = write_config(str(tmp_path / 'cfg.py'), 'retinanet', runs.data_root,
                          extra='train_dataloader = dict(batch_size=1)\n')
    proc = run_train(config, str(tmp_path / 'w'), '--resume',
                     checkpoint(runs.get('retinanet', 'base'), 'epoch_1.pth'), check=False)
    assert proc.returncode != 0
    assert ('mmrepro: cannot resume exactly: per-rank batch size 2 -> 1 between the '
            'checkpoint (1 rank(s) x batch_size 2 x accumulative_counts 1 = 2) and this run '
            '(1 rank(s) x batch_size 1 x accumulative_counts 1 = 1): the global batch '
            'differs. Set train_dataloader.batch_size x optim_wrapper.accumulative_counts to '
            '2 for 1 rank(s). Or set auto_scale_lr=dict(enable=True, ...) to continue '
            'without bitwise reproducibility.') in proc.stderr


STATEFUL_HOOKS = """
switch_pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
                   dict(type='Resize', scale=(160, 128), keep_ratio=True),
                   dict(type='PackDetInputs')]
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False),
                dict(type='EMAHook', momentum=0.2, priority=49),
                dict(type='PipelineSwitchHook', switch_epoch=2,
                     switch_pipeline=switch_pipeline)]
"""


def test_stateful_hooks_correct_after_resume(runs, tmp_path):
    """EMAHook state and PipelineSwitchHook's switch survive a mid-epoch resume."""
    base = runs.get('retinanet', 'hooks', extra=STATEFUL_HOOKS)
    assert state_digest(checkpoint(base)) != runs.digest('retinanet', 'base')
    work_dir, out = _resume(runs, tmp_path, 'retinanet', checkpoint(base, 'iter_20.pth'),
                            extra=STATEFUL_HOOKS)
    assert 'Switch pipeline now!' in out  # switched again in the resumed epoch 3
    final, original = safe_load(checkpoint(work_dir)), safe_load(checkpoint(base))
    # EMAHook's averaged weights travelled with the checkpoint and ended equal.
    assert final['ema_state_dict'].keys() == original['ema_state_dict'].keys()
    assert all(torch.equal(final['ema_state_dict'][k], original['ema_state_dict'][k])
               for k in original['ema_state_dict'])
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))


#: BatchSyncRandomResize drawing every 2 iterations, always to height 64: below every
#: batch's own size, so the size in force at iteration 10 is never the batch's own.
BATCH_SYNC_RESIZE = """
model = dict(data_preprocessor=dict(batch_augments=[dict(
    type='BatchSyncRandomResize', random_size_range=(64, 64), interval=2,
    size_divisor=32)]))
"""


def test_batch_sync_random_resize_size_survives_a_resume(runs, tmp_path):
    base = runs.get('retinanet', 'bsr', extra=BATCH_SYNC_RESIZE)
    saved = safe_load(checkpoint(base, 'iter_10.pth'))['mmrepro']['preprocessor']
    (key, size), = saved.items()
    assert key == 'batch_augments.0._input_size' and size[0] == 64
    work_dir, out = _resume(runs, tmp_path, 'retinanet', checkpoint(base, 'iter_10.pth'),
                            extra=BATCH_SYNC_RESIZE)
    assert f"mmrepro: restored the data preprocessor's {key}" in out
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))
