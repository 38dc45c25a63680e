"""mmpretrain through its own ``tools/train.py`` with mmrepro's two config lines: a
narrow ResNet-18 with RandAugment, RandomErasing (workers) and Mixup/CutMix batch
augments (the main process), DefaultSampler (:mod:`mmrepro.checks.matrix.codebases`).
"""
import pytest
from support.codebase_checks import *  # noqa: F403 (the tests, and their runs fixture)
from support.codebase_runs import CodebaseRuns, codebase_marks
from support.repro_utils import checkpoint

from mmrepro.record.run_record import load_run_record
from mmrepro.resume.checkpoint_io import safe_load

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


@pytest.mark.full
def test_switch_recipe_and_ema_hooks_rerun_and_mid_epoch_resume_are_byte_identical(
        tmp_path_factory, data_root):
    """mmpretrain's SwitchRecipeHook (at epoch 2: a pipeline without RandAugment and
    RandomErasing, Mixup alone as batch augment) and its EMAHook: a rerun and a resume
    from batch 2 of epoch 2 (which switches again, as the hook does on resume) end with
    the base run's weights and losses; the checkpoint holds the EMA's weights."""
    hooks = """custom_hooks.append(dict(type='EMAHook', momentum=0.01, priority='ABOVE_NORMAL'))
custom_hooks.append(dict(type='SwitchRecipeHook', schedule=[dict(
    action_epoch=2,
    train_pipeline=[dict(type='LoadImageFromFile'),
                    dict(type='RandomResizedCrop', scale=32, backend='pillow'),
                    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
                    dict(type='PackInputs')],
    batch_augments=dict(augments=[dict(type='Mixup', alpha=0.8)]))]))
"""
    runs = CodebaseRuns(MODEL, str(tmp_path_factory.mktemp('switch_recipe')), data_root,
                        hooks)
    runs.assert_rerun_and_mid_epoch_resume()
    for run in ('base', 'mid'):
        assert runs.output(run).count('Switch train pipeline at epoch 2.') == 1, run
    saved = safe_load(checkpoint(runs.train('base')))
    weight = 'backbone.conv1.weight'
    assert not saved['ema_state_dict'][f'module.{weight}'].equal(saved['state_dict'][weight])


@pytest.mark.full
def test_precise_bn_hook_rerun_and_mid_epoch_resume_are_byte_identical(tmp_path_factory,
                                                                      data_root):
    """mmpretrain's PreciseBNHook: after each epoch it recomputes the BatchNorm
    statistics over 2 more batches of the training loader. A rerun and a resume from
    batch 2 of epoch 2 end with the base run's weights (statistics included) and
    losses."""
    runs = CodebaseRuns(MODEL, str(tmp_path_factory.mktemp('precise_bn')), data_root,
                        "custom_hooks.append(dict(type='PreciseBNHook', num_samples=4))\n")
    runs.assert_rerun_and_mid_epoch_resume()
    assert runs.output('base').count('Finish Precise BN, BN stats updated.') == 2
