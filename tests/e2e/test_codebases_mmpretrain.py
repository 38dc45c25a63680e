"""mmpretrain through its own ``tools/train.py`` with mmrepro's two config lines: a
narrow ResNet-18 with RandAugment, RandomErasing (workers) and Mixup/CutMix batch
augments (the main process), DefaultSampler (:mod:`support.codebases`).
"""
import pytest
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import CodebaseRuns, codebase_marks

MODEL = 'resnet'
pytestmark = codebase_marks(MODEL)


@pytest.mark.full
def test_repeat_aug_sampler_rerun_and_mid_epoch_resume_are_byte_identical(tmp_path_factory,
                                                                          data_root):
    """mmpretrain's own sampler, RepeatAugSampler (each sample repeated 3 times, spread
    over the ranks), in place of DefaultSampler: a second sampler, full tier."""
    sampler = "train_dataloader['sampler'] = dict(type='RepeatAugSampler', shuffle=True)\n"
    CodebaseRuns(MODEL, str(tmp_path_factory.mktemp('repeat_aug')), data_root,
                 sampler).assert_rerun_and_mid_epoch_resume()
