"""Restarted launches end as an uninterrupted run: torchrun ``--max-restarts`` and a
requeued Slurm job, 2 gloo ranks on CPU, with ``--resume``.

Kills are placed by events of the run (``tests/support/restart_plugin.py``): a rank SIGKILLs
itself after an iteration, or while ``torch.save`` writes a checkpoint, in the first
attempt only (``TORCHELASTIC_RESTART_COUNT`` / ``SLURM_RESTART_COUNT``). Every launch
runs in a session of its own under a time limit, and only that session is killed.
"""
import contextlib
import os
import os.path as osp
import signal
import subprocess
import sys
import time

import pytest
from support.dist_utils import _port, dist_env, restart_cmd, restart_config, run_bounded
from support.repro_utils import REPO, RUN_CWD, checkpoint, state_digest

pytestmark = pytest.mark.slow

#: Seconds a whole restarted launch may take (an uninterrupted one takes about 1 minute).
LIMIT = 600
#: Rank 0 dies after iteration 5 (resumes from epoch_1), then rank 1 after 7 (iter_6).
EACH_RANK = """custom_hooks = custom_hooks + [
    dict(type='AttemptKillHook', rank=0, at_iter=5, attempt=0),
    dict(type='AttemptKillHook', rank=1, at_iter=7, attempt=1)]
"""
#: Rank 0 dies while writing iter_6.pth (64 KiB in): the restart resumes from epoch_1.
IN_SAVE = ("custom_hooks = custom_hooks + "
           "[dict(type='SaveKillHook', rank=0, at_iter=6, attempt=0)]\n")


def _resumed_from(work_dir):
    """The checkpoint each attempt resumed from (rank 0 logs it), the first attempt's none."""
    with open(work_dir + '.log') as f:
        names = [line.rstrip().rstrip('.').split()[-1] for line in f
                 if 'Auto resumed from the latest checkpoint' in line]
    return [osp.basename(name) for name in names if name != 'None']


def _final(work_dir):
    """(final checkpoint's state digest, both ranks' probe lines)."""
    probes = [open(osp.join(work_dir, f'rank{r}.txt')).read() for r in (0, 1)]
    return state_digest(checkpoint(work_dir)), probes


@pytest.fixture(scope='module')
def restart_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp('restarts'))


@pytest.fixture(scope='module')
def uninterrupted(restart_root, data_root):
    """The 2-rank run nothing interrupts, launched as the restarted ones are."""
    work_dir = osp.join(restart_root, 'base')
    cmd = restart_cmd(restart_config(restart_root, data_root, 'base'), work_dir, '--resume')
    assert run_bounded(cmd, dist_env(), LIMIT, work_dir + '.log') == 0, _tail(work_dir)
    return _final(work_dir)


def _tail(work_dir):
    with open(work_dir + '.log') as f:
        return f.read()[-6000:]


def _restarted(root, data_root, tag, extra, restarts):
    work_dir = osp.join(root, tag)
    cmd = restart_cmd(restart_config(root, data_root, tag, extra), work_dir, '--resume',
                      restarts=restarts)
    assert run_bounded(cmd, dist_env(), LIMIT, work_dir + '.log') == 0, _tail(work_dir)
    return work_dir


def test_torchrun_restarts_after_each_rank_is_killed(restart_root, data_root, uninterrupted):
    work_dir = _restarted(restart_root, data_root, 'each-rank', EACH_RANK, restarts=2)
    assert osp.exists(osp.join(work_dir, 'killed-attempt0-rank0-iter5'))
    assert osp.exists(osp.join(work_dir, 'killed-attempt1-rank1-iter7'))
    assert _resumed_from(work_dir) == ['epoch_1.pth', 'iter_6.pth']
    assert _final(work_dir) == uninterrupted


@pytest.mark.full
def test_torchrun_restart_after_a_kill_during_a_save(restart_root, data_root, uninterrupted):
    """Full tier, a second proof of a kill during a save, which CI's default run proves in
    ``test_atomic_save.py::test_kill_during_a_save_then_resume_is_exact``, under torchrun's
    restart (``test_torchrun_restarts_after_each_rank_is_killed``)."""
    work_dir = _restarted(restart_root, data_root, 'in-save', IN_SAVE, restarts=1)
    with open(osp.join(work_dir, 'killed-attempt0-rank0-save6')) as f:
        assert osp.basename(f.readline().strip()).startswith('.iter_6.pth.')
    assert _resumed_from(work_dir) == ['epoch_1.pth']  # not the torn iter_6
    assert not [n for n in os.listdir(work_dir) if n.endswith('.tmp')]  # re-saved, removed
    assert _final(work_dir) == uninterrupted


#: ``scontrol show hostname NODELIST | head -n1`` as MMEngine's Slurm set-up runs it.
FAKE_SCONTROL = '#!/bin/sh\n[ "$1 $2" = "show hostname" ] && echo 127.0.0.1\n'
#: Rank 1 dies after iteration 5 in the job's first run; the requeued run resumes.
SLURM_KILL = ("custom_hooks = custom_hooks + "
              "[dict(type='AttemptKillHook', rank=1, at_iter=5, attempt=0)]\n")


def _slurm_tasks(bin_dir, config, work_dir, restart_count):
    """Start both tasks of a 2-task Slurm job step (``srun``'s environment, faked)."""
    env = {k: v for k, v in dist_env().items()
           if k not in ('MASTER_ADDR', 'WORLD_SIZE', 'RANK', 'LOCAL_RANK')
           and not k.startswith(('SLURM_', 'TORCHELASTIC_'))}
    env.update(PATH=f'{bin_dir}{os.pathsep}{env["PATH"]}', SLURM_NTASKS='2',
               SLURM_NODELIST='node[1]', SLURM_JOB_ID='7', MASTER_PORT=str(_port()),
               SLURM_RESTART_COUNT=str(restart_count))
    procs = []
    for rank in (0, 1):
        with open(f'{work_dir}.job{restart_count}-task{rank}.log', 'w') as log:
            procs.append(subprocess.Popen(
                [sys.executable, osp.join(REPO, 'tools', 'train.py'), config, '--launcher',
                 'slurm', '--work-dir', work_dir, '--resume'], cwd=RUN_CWD,
                env=dict(env, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank)), stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True))
    return procs


def _end(procs, deadline):
    """Wait for ``procs`` until ``deadline`` (time.monotonic()); kill each one's own process
    group (the task and its loader workers) then. Exit codes, None for those killed."""
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append(None)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return codes


def test_requeued_slurm_job_resumes_from_the_last_complete_checkpoint(
        restart_root, data_root, uninterrupted, tmp_path):
    """MMEngine's Slurm set-up (``--launcher slurm``: ``scontrol`` for the master address,
    ``SLURM_PROCID``/``SLURM_NTASKS``), faked where no Slurm runs: a task dies, the job
    is requeued with the same command, and ``--resume`` ends as the uninterrupted run."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'scontrol').write_text(FAKE_SCONTROL)
    (bin_dir / 'scontrol').chmod(0o755)
    config = restart_config(restart_root, data_root, 'slurm', SLURM_KILL)
    work_dir = osp.join(restart_root, 'slurm')
    task0, task1 = _slurm_tasks(bin_dir, config, work_dir, restart_count=0)
    deadline = time.monotonic() + LIMIT
    # srun ends the job step when a task fails: rank 0 goes with rank 1.
    assert _end([task1], deadline) == [-signal.SIGKILL]
    _end([task0], time.monotonic())
    assert osp.exists(osp.join(work_dir, 'killed-attempt0-rank1-iter5'))
    codes = _end(_slurm_tasks(bin_dir, config, work_dir, restart_count=1),
                 time.monotonic() + LIMIT)
    with open(f'{work_dir}.job1-task0.log') as f:
        log = f.read()
    assert codes == [0, 0], log[-6000:]
    assert f"latest checkpoint {osp.join(work_dir, 'epoch_1.pth')}" in log
    assert _final(work_dir) == uninterrupted
