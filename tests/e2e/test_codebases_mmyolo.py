"""MMYOLO through its own ``tools/train.py`` with mmrepro's two config lines, on the yolo
stack (``tools/setup_env.sh yolo``: MMYOLO 0.6.0 needs mmcv 2.0): YOLOv8-n with Mosaic,
YOLOv5RandomAffine and YOLOv5MixUp, its EMA, its warm-up hook and, after epoch 1, its
pipeline switch (:mod:`mmrepro.checks.matrix.codebases`). The mid-epoch resume starts
after the switch.
"""
import pytest
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import ITERS, CodebaseRuns, codebase_marks
from support.repro_utils import checkpoint, train_log

from mmrepro.record.run_record import load_run_record
from mmrepro.resume.checkpoint_io import safe_load

MODEL = 'yolov8'
pytestmark = codebase_marks(MODEL)


def test_the_run_is_mmyolos_on_mmcv_2_0_with_its_hooks(runs: CodebaseRuns):
    """The record names the stack MMYOLO runs on, and its hooks acted: the pipeline
    switched once, the warm-up raised the lr at every iteration, and the checkpoint holds
    the EMA's weights, apart from the model's."""
    base = runs.train('base')
    record, _ = load_run_record(base)
    assert (record['versions']['mmcv'], record['versions']['mmyolo']) == ('2.0.1', '0.6.0')
    assert runs.output('base').count('Switch pipeline now!') == 1
    lrs = [row['lr'] for row in train_log(base)]
    assert len(lrs) == 2 * ITERS and all(a < b for a, b in zip(lrs[:-1], lrs[1:], strict=True)), lrs
    saved = safe_load(checkpoint(base))
    ema = {k[len('module.'):]: v for k, v in saved['ema_state_dict'].items()
           if k.startswith('module.')}
    weight = 'backbone.stem.conv.weight'
    assert ema[weight].shape == saved['state_dict'][weight].shape
    assert not ema[weight].equal(saved['state_dict'][weight])


@pytest.mark.full
def test_ppyoloe_param_scheduler_hook_rerun_and_mid_epoch_resume_are_byte_identical(
        tmp_path_factory, data_root):
    """PPYOLOE's PPYOLOEParamSchedulerHook in place of YOLOv8's warm-up hook: the lr rises
    over the first epoch (warm-up from 0) and falls on a cosine after, set at every
    iteration from the iteration count and each group's ``initial_lr``; a rerun and a
    resume from batch 2 of epoch 2 end with the base run's weights and losses."""
    hook = ("default_hooks['param_scheduler'] = dict(\n"
            "    _delete_=True, type='PPYOLOEParamSchedulerHook', warmup_min_iter=2,\n"
            "    start_factor=0.0, warmup_epochs=1, min_lr_ratio=0.0, total_epochs=3)\n")
    runs = CodebaseRuns(MODEL, str(tmp_path_factory.mktemp('ppyoloe')), data_root, hook)
    runs.assert_rerun_and_mid_epoch_resume()
    lrs = [row['lr'] for row in train_log(runs.train('base'))]
    assert lrs[0] == 0 and len(lrs) == 2 * ITERS, lrs
    assert all(a < b for a, b in zip(lrs[:ITERS], lrs[1:ITERS + 1], strict=True)), lrs
    assert all(a > b for a, b in zip(lrs[ITERS:-1], lrs[ITERS + 1:], strict=True)), lrs
