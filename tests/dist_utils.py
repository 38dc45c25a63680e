"""Launch training on CPU ranks (gloo) through tools/dist_train.sh (torchrun)."""
import os
import os.path as osp
import socket
import subprocess
import sys

from repro_utils import REPO, RUN_CWD, pythonpath


def _port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def dist_env():
    """Environment of a 2-rank launch: CPU ranks, one intra-op thread, test hooks importable.

    CPU ranks (gloo) on every machine: two ranks cannot share one GPU under NCCL. The
    NCCL launch is covered by the cuda tier (tests/test_cuda/). PYTHON: this interpreter
    (dist_train.sh would take the first python on PATH).
    """
    return {**os.environ, 'PORT': str(_port()), 'OMP_NUM_THREADS': '1',
            'PYTHONPATH': pythonpath(osp.join(REPO, 'tests')), 'CUDA_VISIBLE_DEVICES': '',
            'PYTHON': sys.executable}


def dist_cmd(config, work_dir, *args, nproc=2):
    """The ``tools/dist_train.sh`` command line for ``nproc`` ranks."""
    return ['bash', osp.join(REPO, 'tools', 'dist_train.sh'), config, str(nproc),
            '--work-dir', work_dir, *args]


def dist_train(config, work_dir, *args, nproc=2):
    """Train ``config`` on ``nproc`` ranks; return stdout + stderr (assert it succeeded)."""
    proc = subprocess.run(dist_cmd(config, work_dir, *args, nproc=nproc), cwd=RUN_CWD,
                          env=dist_env(),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-5000:]
    return proc.stdout + proc.stderr
