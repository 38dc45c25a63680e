"""MMSegmentation through tools/train.py: FCN R18, IterBasedTrainLoop + InfiniteSampler.

Reruns, another ``num_workers`` and a resume from the middle checkpoint end with the
same weights, byte for byte; ``check_repro`` passes.
"""
from __future__ import annotations

import os.path as osp
import subprocess
import sys

import pytest
from support.repro_utils import (
    REPO,
    RUN_CWD,
    checkpoint,
    losses,
    run_train,
    state_digest,
    train_log,
)

pytest.importorskip('mmseg', reason='mmsegmentation is not installed (tools/setup_env.sh '
                    'installs it)')
pytestmark = pytest.mark.slow
CONFIG = osp.join(REPO, 'configs', 'fcn_r18-d8_12i_tinyseg.py')


def _config(tmp_path_factory, root: str, num_workers: int) -> str:
    path = tmp_path_factory.mktemp('cfg') / f'fcn_w{num_workers}.py'
    path.write_text(
        f'_base_ = {CONFIG!r}\n'
        f'train_dataloader = dict(num_workers={num_workers}, '
        f'persistent_workers={num_workers > 0}, dataset=dict(data_root={root!r}))\n')
    return str(path)


@pytest.fixture(scope='module')
def seg_runs(tmp_path_factory, seg_data_root):
    """Work dirs: ``base`` (2 workers), ``workers0``; and the configs."""
    root = seg_data_root.rstrip('/') + '/'
    configs = {w: _config(tmp_path_factory, root, w) for w in (0, 2)}
    runs = {}
    for name, workers in (('base', 2), ('workers0', 0)):
        runs[name] = str(tmp_path_factory.mktemp(name))
        run_train(configs[workers], runs[name])
    return runs, configs


def test_other_num_workers_are_byte_identical(seg_runs):
    runs, _ = seg_runs
    base = state_digest(checkpoint(runs['base']))
    assert len(losses(train_log(runs['base']))) == 12
    assert state_digest(checkpoint(runs['workers0'])) == base
    assert losses(train_log(runs['workers0'])) == losses(train_log(runs['base']))


@pytest.mark.full
def test_a_rerun_is_byte_identical(seg_runs, tmp_path):
    """Full tier: a second proof of what two runs in other processes prove by ending with the
    same weights (``test_other_num_workers_are_byte_identical``: 0 workers against 2), and
    what ``test_check_repro_passes``'s rerun proves."""
    runs, configs = seg_runs
    rerun = str(tmp_path / 'rerun')
    run_train(configs[2], rerun)
    assert state_digest(checkpoint(rerun)) == state_digest(checkpoint(runs['base']))


def test_resume_mid_run_is_byte_identical(seg_runs, tmp_path):
    runs, configs = seg_runs
    work_dir = str(tmp_path / 'resumed')
    proc = run_train(configs[2], work_dir, '--resume', checkpoint(runs['base'], 'iter_6.pth'))
    assert 'mmrepro: resumed RNG states and data position' in proc.stdout + proc.stderr
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(runs['base']))
    resumed = losses(train_log(work_dir))
    assert [row[0] for row in resumed] == list(range(7, 13))
    assert resumed == losses(train_log(runs['base']))[6:]


@pytest.mark.full
def test_check_repro_passes(seg_runs, tmp_path):
    """The tool on an MMSegmentation config (its rerun; the fixture's runs above prove
    num_workers and resume for MMSegmentation, and the tool's checks run on MMDetection).

    Full tier, a second proof of the check on a config, which CI's default run proves in
    ``test_check_repro.py::test_reproducible_detector_passes_rerun_resume_and_workers_checks``.
    """
    _, configs = seg_runs
    proc = subprocess.run(
        [sys.executable, osp.join(REPO, 'tools', 'check_repro.py'), configs[0], '--iters',
         '4', '--work-dir', str(tmp_path / 'c')],
        cwd=RUN_CWD, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert 'result: REPRODUCIBLE: 1 comparison(s) bit-identical' in proc.stdout
