"""MMEngine's ``compile`` under mmrepro on real models: MMDetection's RetinaNet and
MMSegmentation's FCN, through tools/train.py.

Each compiles for one to several minutes per process on 2 cores (dynamo traces
MMDetection's loss code into some 50 graphs, and again for each new number of boxes), so
these run in the full tier only (marker ``full``, ``TIER=full bash tools/test.sh``: about
15 minutes of CPU on the current stack): a second proof, on real models, of what
``tests/e2e/test_compile.py`` proves on a tiny classifier in CI's default run. With
``aot_eager`` (eager's kernels) and inductor (generated C++ kernels): a rerun with other
``num_workers`` and a resume from the middle of the epoch (which compiles again) end with
the same weights, byte for byte, and the run record says it compiled. Inputs of one size
(a fixed resize) keep the recompiles few. The SGD is the foreach form, which torch 2.1's
dynamo traces, so the floor stack runs them too where asked (``.venv-floor/bin/python -m
pytest -m full tests/e2e/test_compile_models.py``; FCN skips there without
mmsegmentation).
"""
from __future__ import annotations

import os.path as osp

import pytest
from support.repro_utils import (
    REPO,
    checkpoint,
    losses,
    run_train,
    state_digest,
    train_log,
    write_config,
)

from mmrepro.record.run_record import load_run_record

pytestmark = [pytest.mark.slow, pytest.mark.full]

AOT_EAGER = "compile = dict(backend='aot_eager')"
INDUCTOR = 'compile = True'
FOREACH = "optim_wrapper = dict(optimizer=dict(foreach=True))\n"
#: RetinaNet on inputs of one size, 4 iterations of batch 4 (one epoch), a checkpoint
#: every 2 iterations (iteration 2: mid-epoch).
RETINANET = FOREACH + """train_pipeline = [
    dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=(96, 64), keep_ratio=False), dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'), dict(type='PackDetInputs')]
train_dataloader = dict(batch_size=4, batch_sampler=None,
                        dataset=dict(pipeline=train_pipeline))
train_cfg = dict(max_epochs=1)
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=2, save_last=False)]
"""
FCN = osp.join(REPO, 'configs', 'fcn_r18-d8_12i_tinyseg.py')


def _fcn_config(root: str, seg_root: str, workers: int, compile_line: str) -> str:
    """FCN R18 on the tiny segmentation data: 4 iterations of batch 2 (8 images: iteration
    2 is mid-epoch), a checkpoint every 2."""
    path = osp.join(root, f'fcn_w{workers}_{len(compile_line)}.py')
    with open(path, 'w') as f:
        f.write(f'_base_ = {FCN!r}\n{FOREACH}'
                f'train_dataloader = dict(num_workers={workers}, persistent_workers='
                f"{workers > 0}, dataset=dict(data_root={seg_root.rstrip('/') + '/'!r}))\n"
                'train_cfg = dict(max_iters=4)\n'
                'default_hooks = dict(checkpoint=dict(interval=2))\n'
                f'{compile_line}\n')
    return path


class ModelRuns:
    """The tier's runs, by (model, backend, tag), each trained once."""

    def __init__(self, root: str, data_root: str, seg_root: str) -> None:
        self.root, self.data_root, self.seg_root = root, data_root, seg_root
        self._done = {}

    def get(self, model: str, compile_line: str, tag: str) -> str:
        if model == 'fcn':
            pytest.importorskip('mmseg', reason='mmsegmentation is not installed '
                                '(tools/setup_env.sh installs it on the current stack)')
        key = (model, compile_line, tag)
        if key not in self._done:
            workers = 0 if tag == 'workers0' else 2
            name = f"{model}-{'aot' if 'aot' in compile_line else 'inductor'}-{tag}"
            if model == 'retinanet':
                config = write_config(osp.join(self.root, name, 'cfg.py'), 'retinanet',
                                      self.data_root, extra=RETINANET + compile_line,
                                      num_workers=workers, max_epochs=1)
            else:
                config = _fcn_config(self.root, self.seg_root, workers, compile_line)
            args = (['--resume', checkpoint(self.get(model, compile_line, 'base'),
                                            'iter_2.pth')] if tag == 'resumed' else [])
            work_dir = osp.join(self.root, name)
            run_train(config, work_dir, *args, timeout=3600)
            self._done[key] = work_dir
        return self._done[key]


@pytest.fixture(scope='module')
def model_runs(tmp_path_factory, data_root, seg_data_root) -> ModelRuns:
    return ModelRuns(str(tmp_path_factory.mktemp('compiled-models')), data_root,
                     seg_data_root)


@pytest.mark.parametrize('model', ['retinanet', 'fcn'])
def test_aot_eager_rerun_workers_and_mid_epoch_resume_are_bitwise(model_runs, model):
    base = model_runs.get(model, AOT_EAGER, 'base')
    digest = state_digest(checkpoint(base))
    assert state_digest(checkpoint(model_runs.get(model, AOT_EAGER, 'workers0'))) == digest
    resumed = model_runs.get(model, AOT_EAGER, 'resumed')
    assert state_digest(checkpoint(resumed)) == digest
    assert losses(train_log(resumed)) == losses(train_log(base))[2:]
    for run in (base, resumed):  # the resumed run compiled again
        section = load_run_record(run)[0]['compile']
        assert section['enabled'] is True and section['backend'] == 'aot_eager'


@pytest.mark.parametrize('model', ['retinanet', 'fcn'])
def test_inductor_mid_epoch_resume_is_bitwise(model_runs, model):
    base = model_runs.get(model, INDUCTOR, 'base')
    resumed = model_runs.get(model, INDUCTOR, 'resumed')
    assert state_digest(checkpoint(resumed)) == state_digest(checkpoint(base))
    assert losses(train_log(resumed)) == losses(train_log(base))[2:]
    section = load_run_record(base)[0]['compile']
    assert section['backend'] == 'inductor' and section['inductor']['fallback_random'] is True
