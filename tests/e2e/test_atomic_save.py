"""Atomic checkpoints: a run killed while saving leaves no torn file under a good name, and
a disk that fills during a save stops the run with one line, the last checkpoint intact.

The kill is placed by an event: ``SaveKillHook`` (``tests/support/restart_plugin.py``) arms when
the checkpoint of iteration 6 is about to be saved, and the process SIGKILLs itself
after 64 KiB of it are written to its file. The full disk is ``DiskFullHook``
(``tests/support/disk_full.py``): the checkpoint's file gets ENOSPC after 64 KiB.
"""
import os
import os.path as osp
import re
import shutil

import pytest
from mmengine.runner.checkpoint import find_latest_checkpoint
from support.repro_utils import (
    REPO,
    checkpoint,
    pythonpath,
    run_train,
    state_digest,
    write_config,
)

from mmrepro.resume.checkpoint_io import safe_load

# One process x batch 2 -> 8 iterations, checkpoints at iterations 3, 6 and 8 (epoch 1).
CHECKPOINTS = """
custom_imports = dict(imports=['mmrepro', 'support.restart_plugin'], allow_failed_imports=False)
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=3, save_last=False)]
"""
#: The test hooks importable in the training processes.
ENV = {'PYTHONPATH': pythonpath(osp.join(REPO, 'tests'))}
KILL_IN_SAVE = ("custom_hooks = custom_hooks + "
                "[dict(type='SaveKillHook', rank=0, at_iter=6, after_bytes=65536)]\n")


@pytest.mark.slow
def test_kill_during_a_save_then_resume_is_exact(data_root, tmp_path):
    root = str(tmp_path)
    base_cfg = write_config(osp.join(root, 'cfg-base', 'cfg.py'), 'retinanet', data_root,
                            extra=CHECKPOINTS, num_workers=1, max_epochs=1)
    kill_cfg = write_config(osp.join(root, 'cfg-kill', 'cfg.py'), 'retinanet', data_root,
                            extra=CHECKPOINTS + KILL_IN_SAVE, num_workers=1, max_epochs=1)
    base, work_dir = osp.join(root, 'base'), osp.join(root, 'killed')
    run_train(base_cfg, base, env=ENV)
    proc = run_train(kill_cfg, work_dir, check=False, env=ENV)
    assert proc.returncode == -9, proc.stderr[-3000:]
    with open(osp.join(work_dir, 'killed-attempt0-rank0-save6')) as f:
        tmp, written = f.read().split()
    # What the kill left: a 64 KiB temporary file, never a torn iter_6.pth.
    assert osp.dirname(tmp) == work_dir and osp.getsize(tmp) == int(written) == 65536
    assert osp.basename(tmp).startswith('.iter_6.pth.') and tmp.endswith('.tmp')
    names = sorted(n for n in os.listdir(work_dir) if n.endswith('.pth'))
    assert names == ['iter_3.pth']
    for name in names:
        safe_load(osp.join(work_dir, name))  # complete
    assert find_latest_checkpoint(work_dir) == osp.join(work_dir, 'iter_3.pth')
    out = run_train(kill_cfg, work_dir, '--resume', env=ENV)
    assert f"latest checkpoint {osp.join(work_dir, 'iter_3.pth')}" in out.stdout + out.stderr
    assert not osp.exists(tmp)  # iter_6.pth was saved again, its leftover removed
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))
    assert checkpoint(work_dir) == osp.join(work_dir, 'epoch_1.pth')


#: The test configs' hooks, and the disk filling while epoch_3.pth (iteration 24) is saved.
DISK_FULL = """
custom_imports = dict(imports=['mmrepro', 'support.disk_full'], allow_failed_imports=False)
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=10, save_last=False),
                dict(type='DiskFullHook', name='epoch_3.pth')]
"""


@pytest.mark.slow
def test_a_disk_that_fills_during_a_save_is_one_line_and_resume_is_exact(runs, tmp_path):
    """Resumed from iteration 20 of the cached run, the disk fills at the save of
    iteration 24; then ``--resume`` with the checkpoint the line names."""
    base = runs.get('retinanet', 'base')
    work_dir = tmp_path / 'full'
    work_dir.mkdir()
    last = str(work_dir / 'iter_20.pth')
    shutil.copy(checkpoint(base, 'iter_20.pth'), last)
    (work_dir / 'last_checkpoint').write_text(last)
    config = write_config(str(tmp_path / 'cfg' / 'cfg.py'), 'retinanet', runs.data_root,
                          extra=DISK_FULL)
    proc = run_train(config, str(work_dir), '--resume', check=False, env=ENV)
    assert proc.returncode == 1 and 'Traceback' not in proc.stderr, proc.stderr[-3000:]
    saving = str(work_dir / 'epoch_3.pth')
    assert re.fullmatch(
        rf'mmrepro-train: error: cannot write {re.escape(saving)}: no space left on the device '
        rf'\(it needs [\d.]+ MiB, [\d.]+ [KMG]iB free in {re.escape(str(work_dir))}\); nothing '
        'was replaced and no partial file is left; the last complete checkpoint is '
        f'{re.escape(last)}: free space, then continue with --resume {re.escape(last)}',
        proc.stderr.splitlines()[-1]), proc.stderr[-3000:]
    assert sum(line.startswith('mmrepro-train: error:') for line in proc.stderr.splitlines()) == 1
    assert sorted(n for n in os.listdir(work_dir) if n.endswith(('.pth', '.tmp'))) == [
        'iter_20.pth']
    assert (work_dir / 'last_checkpoint').read_text() == last
    assert state_digest(last) == state_digest(checkpoint(base, 'iter_20.pth'))
    run_train(runs.config('retinanet', 'base'), str(work_dir), '--resume', last)
    assert state_digest(checkpoint(str(work_dir))) == state_digest(checkpoint(base))
