"""Checkpoints that prove themselves, through tools/train.py on the demo RetinaNet: one that
does not match its digests trains with --no-verify-checkpoints, and the log and the run
record say it was not verified. (Without the option each such file is refused in one line,
nothing written: tests/e2e/test_error_contract.py.)"""
import glob
import json
import os.path as osp
import shutil

import pytest
from support.checkpoints import flip_bit
from support.repro_utils import checkpoint, run_train, state_digest

from mmrepro.resume.checkpoint_io import safe_load

pytestmark = pytest.mark.slow


def test_no_verify_checkpoints_trains_from_a_changed_file_and_the_record_says_so(runs,
                                                                                 tmp_path):
    base = runs.get('retinanet', 'base')
    path = str(tmp_path / 'iter_20.pth')  # 4 iterations before the end
    shutil.copy(checkpoint(base, 'iter_20.pth'), path)
    name = 'bbox_head.retina_cls.weight'
    flip_bit(path, safe_load(path)['state_dict'][name])
    work_dir = str(tmp_path / 'anyway')
    proc = run_train(runs.config('retinanet', 'base'), work_dir, '--resume', path,
                     '--no-verify-checkpoints')
    out = proc.stdout + proc.stderr
    assert (f'mmrepro: loading {path} although it does not hold what was saved in it '
            '(weights: expected sha256 ') in out
    assert (f'the first tensor that differs is state_dict[{name!r}]), since '
            'randomness.verify_checkpoints=False; the run record says it was not verified.'
            ) in out
    (record,) = glob.glob(osp.join(work_dir, '*', 'run_record.json'))
    with open(record) as f:
        record = json.load(f)
    entry = record['checkpoint_verification']
    assert entry['file'] == path and entry['verified'] is False
    assert entry['loaded_anyway'] == 'randomness.verify_checkpoints=False'
    assert entry['parts'] == dict(weights='differs', optimizer='matches',
                                  param_schedulers='matches', mmrepro='matches', meta='matches')
    assert record['randomness']['verify_checkpoints'] is False
    assert state_digest(checkpoint(work_dir)) != state_digest(checkpoint(base))  # another run
