"""Launch training on CPU ranks (gloo) through tools/dist_train.sh (torchrun)."""
import contextlib
import os
import os.path as osp
import signal
import socket
import subprocess
import sys

from support.repro_utils import REPO, RUN_CWD, pythonpath, write_config


def _port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def dist_env():
    """Environment of a 2-rank launch: CPU ranks, one intra-op thread, test hooks importable.

    CPU ranks (gloo) on every machine: two ranks cannot share one GPU under NCCL. The
    NCCL launch is covered by the cuda tier (tests/cuda/). PYTHON: this interpreter
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


def restart_cmd(config, work_dir, *args, nproc=2, restarts=1):
    """torchrun with ``--max-restarts restarts`` around tools/train.py, as users launch it."""
    return [sys.executable, '-m', 'torch.distributed.run', f'--nproc_per_node={nproc}',
            f'--max-restarts={restarts}', '--master_addr=127.0.0.1', f'--master_port={_port()}',
            osp.join(REPO, 'tools', 'train.py'), config, '--launcher', 'pytorch',
            '--work-dir', work_dir, *args]


def run_bounded(cmd, env, timeout, log):
    """Run ``cmd`` in a session of its own, output to the file ``log``; return its exit code.

    On timeout the process group it leads (the launcher, its ranks and their workers, and
    nothing else) is killed and the test fails; so are its leftovers when it ends.
    """
    with open(log, 'w') as out:
        proc = subprocess.Popen(cmd, cwd=RUN_CWD, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if code is None:
        with open(log) as f:
            raise AssertionError(f'not done within {timeout} s: {" ".join(cmd)}\n'
                                 f'{f.read()[-6000:]}')
    return code


# 2 ranks x batch 2 -> 4 iterations per epoch, 2 epochs; checkpoints at iterations 3, 4
# (epoch 1), 6 and 8 (epoch 2).
RESTART = """
custom_imports = dict(imports=['mmrepro', 'support.rank_probe_hook', 'support.restart_plugin'],
                      allow_failed_imports=False)
custom_hooks = [dict(type='ReproducibilityHook'), dict(type='RankProbeHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=3, save_last=False)]
"""


def restart_config(root, data_root, tag, extra=''):
    """The config of the restart tests (:data:`RESTART`, then ``extra``) in ``root``."""
    return write_config(osp.join(root, f'cfg-{tag}', 'cfg.py'), 'retinanet', data_root,
                        extra=RESTART + extra, num_workers=1, max_epochs=2)
