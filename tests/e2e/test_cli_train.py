"""tools/train.py end to end: reruns are byte-identical; CLI and config validation."""
import os.path as osp
import re
import subprocess
import sys

import pytest
from support.repro_utils import (
    CONFIGS,
    REPO,
    RUN_CWD,
    checkpoint,
    losses,
    run_log,
    run_train,
    state_digest,
    train_log,
    write_config,
)

from mmrepro.resume.checkpoint_io import safe_load

pytestmark = pytest.mark.slow


@pytest.mark.parametrize('model', [pytest.param('retinanet', marks=pytest.mark.floor),
                                   'faster_rcnn'])
def test_rerun_is_byte_identical(runs, model):
    """The floor stack reruns RetinaNet; its Faster R-CNN resumes from the middle of an
    epoch to the same weights (``test_resume.py``), a second process ending as the first."""
    first, second = runs.get(model, 'base'), runs.get(model, 'rerun')
    assert state_digest(checkpoint(first)) == state_digest(checkpoint(second))
    log_a, log_b = losses(train_log(first)), losses(train_log(second))
    assert len(log_a) == 24 and log_a == log_b  # 3 epochs x 8 iterations, every loss


def test_different_seed_gives_different_weights(runs):
    assert runs.digest('retinanet', 'base') != runs.digest('retinanet', 'seed7', '--seed', '7')


def test_the_seed_line_names_where_the_seed_came_from(runs):
    assert 'mmrepro: seed 0 (config); ' in run_log(runs.get('retinanet', 'base'))
    seeded = runs.get('retinanet', 'seed7', '--seed', '7')
    assert 'mmrepro: seed 7 (--seed); ' in run_log(seeded)


def test_seedless_config_reproduces_with_recorded_seed(runs, tmp_path):
    no_seed = "randomness = dict(_delete_=True, deterministic=True)\n"
    work_dir = runs.get('retinanet', 'noseed', extra=no_seed, max_epochs=1)
    ckpt = safe_load(checkpoint(work_dir))
    seed = ckpt['meta']['seed']
    assert isinstance(seed, int) and ckpt['mmrepro']['seed'] == seed
    dump = open(osp.join(work_dir, 'retinanet_noseed.py')).read()
    assert re.search(rf"seed={seed}\b", dump.replace(' ', ''))
    log = run_log(work_dir)
    assert f'mmrepro: seed {seed} (drawn on rank 0 and broadcast' in log
    again = runs.get('retinanet', 'noseed-rerun', '--seed', str(seed), extra=no_seed,
                     max_epochs=1)
    assert state_digest(checkpoint(again)) == state_digest(checkpoint(work_dir))


def test_resume_loads_weights_only_without_escape_hatches(runs, tmp_path, monkeypatch):
    monkeypatch.delenv('TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD', raising=False)
    first = runs.get('retinanet', 'base')
    config = write_config(str(tmp_path / 'cfg.py'), 'retinanet', runs.data_root)
    proc = run_train(config, str(tmp_path / 'resumed'), '--resume',
                     checkpoint(first, 'epoch_2.pth'))
    assert 'resumed epoch: 2, iter: 16' in proc.stdout + proc.stderr
    assert osp.exists(tmp_path / 'resumed' / 'epoch_3.pth')


def test_report_names_checkpoint_log_and_seed(runs):
    work_dir = runs.get('retinanet', 'base')
    log = run_log(work_dir)
    assert 'mmrepro: training finished' in log and 'seed:        0' in log
    assert osp.join(work_dir, 'epoch_3.pth') in log


def test_faster_rcnn_trains_with_replaced_roi_align(runs):
    """Deterministic mode swaps mmcv RoIAlign; the audit in the log says so."""
    log = run_log(runs.get('faster_rcnn', 'base'))
    assert 'mmcv op audit: 4 module(s) backed by ops nondeterministic on CUDA' in log
    assert log.count('| RoIAlign | RoIAlign | replaced') == 4
    assert 'roi_head.bbox_roi_extractor.roi_layers.0' in log


@pytest.mark.parametrize('argv, message', [
    (['--cfg-options', 'randomness.seed=-5'],
     'mmrepro-train: error: randomness.seed must be in [0, 4294967295] (2**32 - 1), got -5.'),
    (['--cfg-options', 'randomness.determinstic=True'],
     "mmrepro-train: error: Unknown key(s) ['determinstic'] in `randomness`"),
])
def test_bad_randomness_is_one_error_line_and_exit_2(tmp_path, argv, message):
    proc = subprocess.run([sys.executable, osp.join(REPO, 'tools', 'train.py'),
                           CONFIGS['retinanet'], '--work-dir', str(tmp_path / 'w'), *argv],
                          cwd=RUN_CWD, capture_output=True, text=True, timeout=300)
    errors = [line for line in proc.stderr.splitlines() if 'error' in line.lower()]
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert len(errors) == 1 and errors[0].startswith(message), proc.stderr
    assert not (tmp_path / 'w').exists()  # nothing built or written
