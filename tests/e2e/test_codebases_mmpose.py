"""mmpose through its own ``tools/train.py`` with mmrepro's two config lines: a narrow
ResNet-18 SimpleBaseline (top-down heatmap) with RandomBBoxTransform, RandomHalfBody and
TopdownAffine, at 64x64, over COCO keypoints generated in the demo's boxes
(:mod:`mmrepro.checks.matrix.codebases`).
"""
import pytest
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import ITERS, MID_CHECKPOINT, CodebaseRuns, codebase_marks
from support.repro_utils import checkpoint

from mmrepro.checks.matrix.codebases import MID

MODEL = 'topdown_heatmap'
pytestmark = codebase_marks(MODEL)


#: Two sources of the same keypoints (4 images each) in mmpose's CombinedDataset, batched
#: by its MultiSourceSampler (one sample of each source a batch).
MULTI_SOURCE = """pose_source = dict(
    type='CocoDataset', data_mode='topdown', data_root='', pipeline=[],
    ann_file=train_dataloader['dataset']['ann_file'],
    data_prefix=train_dataloader['dataset']['data_prefix'])
train_dataloader['dataset'] = dict(
    _delete_=True, type='CombinedDataset',
    metainfo=dict(from_file='configs/_base_/datasets/coco.py'),
    datasets=[dict(pose_source, indices=[0, 1, 2, 3]), dict(pose_source, indices=[4, 5, 6, 7])],
    pipeline=train_pipeline)
train_dataloader['sampler'] = dict(_delete_=True, type='MultiSourceSampler', batch_size=2,
                                   source_ratio=[1, 1])
"""


@pytest.mark.full
def test_multi_source_sampler_reruns_exactly_and_its_resume_says_why_it_is_not(
        tmp_path_factory, data_root):
    """mmpose's CombinedDataset batched by its MultiSourceSampler: a rerun is exact. A
    resume is not: the sampler's per-source order runs on across epochs in generators no
    checkpoint holds, and its ``set_epoch`` sets no epoch, so mmrepro cannot position
    it. The resumed run says so and why, and trains its epoch again from the start."""
    runs = CodebaseRuns(MODEL, str(tmp_path_factory.mktemp('multi_source')), data_root,
                        MULTI_SOURCE)
    path = checkpoint(runs.train('base'), MID_CHECKPOINT)
    runs.train('rerun')
    runs.assert_same_run('rerun')
    runs.train('mid', '--resume', '--cfg-options', f'load_from={path}')
    assert ('mmrepro: the data position to resume is in epoch 1, but MultiSourceSampler '
            'keeps no epoch (its set_epoch sets no `epoch`), so its passes cannot be told '
            'apart: not skipping any batch, and this resume is not exact.'
            ) in runs.output('mid')
    digest, logged = runs.final('mid')
    assert [row[0] for row in logged] == list(range(MID + 1, MID + ITERS + 1))
    assert digest != runs.final('base')[0]
