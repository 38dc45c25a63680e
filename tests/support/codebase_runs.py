"""Training runs of the other codebases' models (:mod:`mmrepro.checks.matrix.codebases`),
each through its codebase's own ``tools/train.py``, and the comparisons the codebase
tests make.

One :class:`CodebaseRuns` per test module (a module-scoped fixture): a run is made once,
on first use, and named (``base``, ``rerun``, ...). The runs import this checkout's
mmrepro (first on ``PYTHONPATH``), as the config's ``custom_imports`` asks.
"""
from __future__ import annotations

import os
import os.path as osp
import subprocess
import sys
from typing import Dict, List, Tuple

import pytest

from mmrepro.checks.matrix.codebases import CONFIGS, EPOCHS, MID, SAMPLES, write_codebase_config
from mmrepro.demo import derive_codebase_data
from support.codebases import stack_codebases, train_script
from support.dist_utils import dist_env, run_bounded
from support.repro_utils import (
    REPO,
    RUN_CWD,
    checkpoint,
    losses,
    pythonpath,
    state_digest,
    train_log,
)

#: Iterations per epoch and per run (batch size 2).
ITERS = SAMPLES // 2
#: The base run's checkpoints the resume tests start from: an epoch's end, and batch
#: ``MID - ITERS`` of epoch 2.
EPOCH_CHECKPOINT, MID_CHECKPOINT = 'epoch_1.pth', f'iter_{MID}.pth'
#: What mmrepro logs when it restores a checkpoint's RNG states and data position.
RESUMED = 'mmrepro: resumed RNG states and data position'
#: The codebases whose ``tools/train.py`` resumes from the path given after ``--resume``.
RESUME_TAKES_A_PATH = ('mmyolo', )


def codebase_marks(model: str) -> pytest.MarkDecorator:
    """A codebase test module's ``pytestmark`` (``slow``); skips the module where this
    stack has no ``model``'s codebase."""
    codebase = CONFIGS[model][0]
    if codebase not in stack_codebases():
        pytest.skip(f'{codebase} is not in this stack (tools/setup_env.sh installs '
                    f'mmpretrain, mmpose and mmrotate on the current stack, MMYOLO on the '
                    f'yolo stack: docs/install.md)', allow_module_level=True)
    return pytest.mark.slow


def _env() -> Dict[str, str]:
    """A run's environment: this checkout's mmrepro first on ``PYTHONPATH``."""
    return {**os.environ, 'PYTHONPATH': pythonpath(REPO)}


class CodebaseRuns:
    """``model``'s runs under ``root``, over the demo dataset at ``coco``, its config
    ending with ``extra``."""

    def __init__(self, model: str, root: str, coco: str, extra: str = '') -> None:
        self.model, self.root, self.coco, self.extra = model, root, coco, extra
        self.script = train_script(CONFIGS[model][0])
        self.data = osp.join(root, 'data')
        derive_codebase_data(coco, self.data)
        self.dirs: Dict[str, str] = {}

    def config(self, num_workers: int = 2, test: bool = False) -> str:
        """The model's config loading with ``num_workers``; ``test``: with its test
        loader and evaluator."""
        name = f'{self.model}_w{num_workers}{"_test" if test else ""}.py'
        return write_codebase_config(self.model, self.coco, self.data,
                                     osp.join(self.root, name), num_workers, self.extra, test)

    def train(self, name: str, *args: str, num_workers: int = 2) -> str:
        """The work dir of run ``name`` (trained now if it is new): the codebase's
        ``tools/train.py`` on :meth:`config`, with ``args``."""
        if name not in self.dirs:
            work_dir = osp.join(self.root, name)
            cmd = [sys.executable, self.script, self.config(num_workers), '--work-dir',
                   work_dir, *args]
            proc = subprocess.run(cmd, cwd=RUN_CWD, env=_env(), capture_output=True, text=True,
                                  timeout=900)
            assert proc.returncode == 0, (' '.join(cmd) + '\n' + proc.stdout[-3000:]
                                          + proc.stderr[-6000:])
            with open(osp.join(work_dir, 'output.txt'), 'w') as f:
                f.write(proc.stdout + proc.stderr)
            self.dirs[name] = work_dir
        return self.dirs[name]

    def train_ranks(self, name: str, nproc: int = 2) -> str:
        """The work dir of run ``name`` on ``nproc`` CPU ranks (torchrun, gloo)."""
        if name not in self.dirs:
            work_dir = osp.join(self.root, name)
            os.makedirs(work_dir, exist_ok=True)
            env = {**dist_env(), 'PYTHONPATH': pythonpath(REPO)}
            cmd = [sys.executable, '-m', 'torch.distributed.run', f'--nproc_per_node={nproc}',
                   '--master_addr=127.0.0.1', f"--master_port={env['PORT']}",
                   self.script, self.config(), '--launcher', 'pytorch', '--work-dir', work_dir]
            log = osp.join(work_dir, 'output.txt')
            code = run_bounded(cmd, env, 900, log)
            with open(log) as f:
                assert code == 0, f.read()[-6000:]
            self.dirs[name] = work_dir
        return self.dirs[name]

    def assert_rerun_and_mid_epoch_resume(self) -> None:
        """A rerun and a resume from the mid-epoch checkpoint end as the base run."""
        self.train('base')
        self.train('rerun')
        self.assert_same_run('rerun')
        self.assert_resume('mid', MID_CHECKPOINT, MID + 1)

    def output(self, name: str) -> str:
        with open(osp.join(self.dirs[name], 'output.txt')) as f:
            return f.read()

    def final(self, name: str) -> Tuple[str, List[tuple]]:
        """Run ``name``'s final weights (digest) and its logged losses."""
        work_dir = self.dirs[name]
        return state_digest(checkpoint(work_dir)), losses(train_log(work_dir))

    def assert_same_run(self, name: str, other: str = 'base') -> None:
        """Runs ``name`` and ``other`` end with the same weights, byte for byte, and
        log the same losses at every iteration."""
        digest, logged = self.final(name)
        assert len(self.final(other)[1]) == EPOCHS * ITERS
        assert (digest, logged) == self.final(other)

    def assert_resume(self, name: str, source: str, first_iter: int) -> None:
        """Run ``name``, resumed from the base run's checkpoint ``source``, restores
        mmrepro's state and ends as the base run did (weights, and the losses of the
        iterations it trains from ``first_iter`` on)."""
        # `--resume` and `load_from`: each script's way to resume from a given checkpoint
        # (mmrotate's, MMDetection's script, takes no path after --resume); MMYOLO's
        # takes the path after --resume (alone, it empties load_from)
        path = checkpoint(self.train('base'), source)
        if CONFIGS[self.model][0] in RESUME_TAKES_A_PATH:
            self.train(name, '--resume', path)
        else:
            self.train(name, '--resume', '--cfg-options', f'load_from={path}')
        assert RESUMED in self.output(name)
        digest, logged = self.final(name)
        base_digest, base_logged = self.final('base')
        assert [row[0] for row in logged] == list(range(first_iter, EPOCHS * ITERS + 1))
        assert (digest, logged) == (base_digest, base_logged[first_iter - 1:])


def run_tool(module: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m mmrepro.cli.<module> args`` (a console script), from this checkout."""
    return subprocess.run([sys.executable, '-m', f'mmrepro.cli.{module}', *args], cwd=RUN_CWD,
                          env=_env(), capture_output=True, text=True, timeout=900)
