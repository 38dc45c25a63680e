"""mmpretrain through its own ``tools/train.py`` with mmrepro's two config lines: a
narrow ResNet-18 with RandAugment, RandomErasing (workers) and Mixup/CutMix batch
augments (the main process), DefaultSampler (:mod:`support.codebases`).
"""
import pytest
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import CodebaseRuns, codebase_marks

from mmrepro.record.run_record import load_run_record

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


@pytest.mark.full
def test_compiled_rerun_workers_and_mid_epoch_resume_are_byte_identical(tmp_path_factory,
                                                                        data_root):
    """MMEngine's ``compile`` (``aot_eager``) through mmpretrain's own script: a rerun,
    ``num_workers`` 0 against 2 and a mid-epoch resume (which compiles again) end with
    the base run's weights and losses, and the run record says compiled. Full tier: CI's
    default run proves ``compile`` with every guarantee on MMEngine's own classifier
    (``test_compile.py``)."""
    runs = CodebaseRuns(MODEL, str(tmp_path_factory.mktemp('compiled')), data_root,
                        "compile = dict(backend='aot_eager')\n")
    runs.assert_rerun_and_mid_epoch_resume()
    runs.train('workers0', num_workers=0)
    runs.assert_same_run('workers0')
    record, _ = load_run_record(runs.train('base'))
    assert (record['compile']['enabled'], record['compile']['backend']) == (True, 'aot_eager')
    assert 'Model has been "compiled"' in runs.output('base')
