"""torchrun ``--max-restarts`` over NCCL: a rank killed mid-run, the group restarted,
``--resume``, and the same weights as an uninterrupted run (the cuda tier; skipped
without a GPU). One command: ``bash tools/test_cuda.sh -k restart``.

Two ranks where two GPUs are visible (NCCL refuses two ranks on one GPU), otherwise
one: the restarted rank still initialises NCCL through torchrun's agent store.
"""
import os
import os.path as osp

import pytest
import torch
from support.dist_utils import dist_env, restart_cmd, restart_config, run_bounded
from support.repro_utils import checkpoint, state_digest

from mmrepro.resume.checkpoint_io import safe_load

pytestmark = [pytest.mark.cuda, pytest.mark.slow]
LIMIT = 600


def _launch(root, data_root, tag, extra, nproc, restarts):
    env = {k: v for k, v in dist_env().items() if k != 'CUDA_VISIBLE_DEVICES'}
    work_dir = osp.join(root, tag)
    cmd = restart_cmd(restart_config(root, data_root, tag, extra), work_dir, '--resume',
                      nproc=nproc, restarts=restarts)
    code = run_bounded(cmd, env, LIMIT, work_dir + '.log')
    with open(work_dir + '.log') as f:
        assert code == 0, f.read()[-6000:]
    return work_dir


def test_torchrun_restart_over_nccl_is_exact(data_root, tmp_path):
    nproc = min(2, torch.cuda.device_count())
    last = nproc - 1
    kill = (f"custom_hooks = custom_hooks + "
            f"[dict(type='AttemptKillHook', rank={last}, at_iter=5, attempt=0)]\n")
    root = str(tmp_path)
    base = _launch(root, data_root, 'base', '', nproc, restarts=0)
    killed = _launch(root, data_root, 'killed', kill, nproc, restarts=1)
    assert osp.exists(osp.join(killed, f'killed-attempt0-rank{last}-iter5'))
    assert safe_load(checkpoint(killed))['meta']['run_record']['backend'] == 'nccl'
    assert state_digest(checkpoint(killed)) == state_digest(checkpoint(base))
    probes = [open(osp.join(d, 'rank0.txt')).read() for d in (base, killed)]
    assert probes[0] == probes[1]
    assert not [n for n in os.listdir(killed) if n.endswith('.tmp')]
