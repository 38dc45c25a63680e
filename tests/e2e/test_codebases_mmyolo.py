"""MMYOLO through its own ``tools/train.py`` with mmrepro's two config lines, on the yolo
stack (``tools/setup_env.sh yolo``: MMYOLO 0.6.0 needs mmcv 2.0): YOLOv8-n with Mosaic,
YOLOv5RandomAffine and YOLOv5MixUp, its EMA, its warm-up hook and, after epoch 1, its
pipeline switch (:mod:`support.codebases`). The mid-epoch resume starts after the switch.
"""
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
