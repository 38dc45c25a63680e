"""Real detectors trained on CUDA: reruns, resume, num_workers, check_repro, launchers.

The ``cuda`` tier (``bash tools/test_cuda.sh``); skipped without a GPU. The runs are the
session's shared cache (``tests/conftest.py``), so on a GPU machine they train there.
"""
from __future__ import annotations

import json
import os
import os.path as osp
import subprocess
import sys

import pytest
from support.repro_utils import (
    REPO,
    RUN_CWD,
    checkpoint,
    pythonpath,
    run_train,
    state_digest,
    write_config,
)

from mmrepro.record.run_record import find_log_dir

pytestmark = [pytest.mark.cuda, pytest.mark.slow]
MODELS = ['retinanet', 'faster_rcnn']


def _record(work_dir):
    with open(osp.join(find_log_dir(work_dir), 'run_record.json')) as f:
        return json.load(f)


@pytest.mark.parametrize('model', MODELS)
def test_rerun_and_other_num_workers_are_bit_identical_on_cuda(runs, model):
    base = runs.get(model, 'base')
    record = _record(base)
    assert record['devices']['cuda'] and record['torch_flags']['deterministic_algorithms']
    assert runs.digest(model, 'rerun') == runs.digest(model, 'base')
    assert runs.digest(model, 'workers0', num_workers=0) == runs.digest(model, 'base')


@pytest.mark.parametrize('model', MODELS)
@pytest.mark.parametrize('name', ['epoch_1.pth', 'iter_10.pth'])
def test_resume_is_exact_on_cuda(runs, tmp_path, model, name):
    base = runs.get(model, 'base')
    config = write_config(str(tmp_path / 'cfg.py'), model, runs.data_root)
    work_dir = str(tmp_path / 'resumed')
    proc = run_train(config, work_dir, '--resume', checkpoint(base, name))
    assert 'mmrepro: resumed RNG states and data position' in proc.stdout + proc.stderr
    assert state_digest(checkpoint(work_dir)) == state_digest(checkpoint(base))


def test_check_repro_passes_on_cuda(data_root, tmp_path):
    config = write_config(str(tmp_path / 'cfg' / 'frcnn.py'), 'faster_rcnn', data_root,
                          num_workers=0)
    proc = subprocess.run(
        [sys.executable, osp.join(REPO, 'tools', 'check_repro.py'), config, '--iters', '3',
         '--resume-check', '--workers-check', '1', '--work-dir', str(tmp_path / 'check')],
        cwd=RUN_CWD, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert 'result: REPRODUCIBLE: 3 comparison(s) bit-identical' in proc.stdout


def _launch(script, config, work_dir):
    """One NCCL rank through torchrun, without CUBLAS_WORKSPACE_CONFIG in the environment."""
    env = {k: v for k, v in os.environ.items() if k != 'CUBLAS_WORKSPACE_CONFIG'}
    env['PYTHONPATH'] = pythonpath(REPO)
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node=1',
           '--master_port=29533', script, config, '--launcher', 'pytorch',
           '--work-dir', work_dir]
    proc = subprocess.run(cmd, cwd=RUN_CWD, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-5000:]
    return _record(work_dir)


def test_mmrepro_launcher_and_mmdetection_launcher_on_nccl(runs, tmp_path):
    """tools/train.py and MMDetection's own tools/train.py, with the three config lines."""
    config = write_config(str(tmp_path / 'cfg.py'), 'faster_rcnn', runs.data_root,
                          max_epochs=1)
    ours = _launch(osp.join(REPO, 'tools', 'train.py'), config, str(tmp_path / 'ours'))
    assert ours['backend'] == 'nccl' and ours['torch_flags']['deterministic_algorithms']
    import mmdet
    mmdet_train = osp.join(osp.dirname(mmdet.__file__), '.mim', 'tools', 'train.py')
    if not osp.exists(mmdet_train):
        pytest.skip(f'MMDetection\'s tools/train.py is not installed ({mmdet_train})')
    theirs = _launch(mmdet_train, config, str(tmp_path / 'theirs'))
    assert theirs['backend'] == 'nccl' and theirs['seed'] == 0
