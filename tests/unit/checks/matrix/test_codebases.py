"""mmrepro.checks.matrix.codebases: the other codebases' models, as the support matrix
names them and as their configs are written."""
import importlib.util
import os

import pytest
from mmengine.config import Config

from mmrepro.checks.matrix import codebases as cb
from mmrepro.checks.matrix import run as sm


def test_each_model_is_a_family_of_the_matrix_named_by_its_codebase():
    assert sm.CODEBASE_FAMILIES == {
        'mmpretrain-resnet': 'resnet', 'mmpose-topdown-heatmap': 'topdown_heatmap',
        'mmrotate-rotated-retinanet': 'rotated_retinanet',
        'mmrotate-oriented-rcnn': 'oriented_rcnn', 'mmyolo-yolov8': 'yolov8'}
    assert {cb.CONFIGS[model][0] for model in sm.CODEBASE_FAMILIES.values()} == set(
        cb.CODEBASES)


def test_a_written_config_holds_the_two_lines_its_data_and_the_schedule(tmp_path):
    path = cb.write_codebase_config('resnet', '/demo', '/derived', str(tmp_path / 'a' / 'c.py'),
                                    num_workers=0)
    with open(path) as f:
        text = f.read()
    assert text.startswith("_base_ = ['mmpretrain::_base_/models/resnet18.py', ")
    assert cb.TWO_LINES in text
    assert ("train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False,"
            in text)
    assert ("dataset=dict(indices=8, type='CustomDataset', data_root='/derived', "
            "data_prefix='cls', pipeline=train_pipeline))") in text
    assert 'train_cfg = dict(max_epochs=2, val_interval=1)' in text
    assert 'test_dataloader = None' in text  # a test loader only when asked
    with_test = cb.write_codebase_config('resnet', '/demo', '/derived', str(tmp_path / 't.py'),
                                         test=True)
    with open(with_test) as f:
        assert "test_evaluator = dict(type='Accuracy', topk=(1, ))" in f.read()


@pytest.mark.skipif(importlib.util.find_spec('mmpretrain') is None,
                    reason='mmpretrain is not in this stack (the current stack has it)')
def test_a_family_config_loads_over_the_data_root(tmp_path):
    path = sm.family_config('mmpretrain-resnet', str(tmp_path / 'family'), '/demo')
    assert path == str(tmp_path / 'family' / 'mmpretrain-resnet.py')
    cfg = Config.fromfile(path)
    assert cfg.train_dataloader.dataset.data_root == '/demo/codebases'
    assert cfg.randomness == dict(seed=0, deterministic=True)
    assert cfg.model.backbone.base_channels == 16  # the narrowed ResNet-18


@pytest.mark.skipif(importlib.util.find_spec('mmyolo') is not None,
                    reason='mmyolo is installed here: the error needs a stack without it')
def test_a_family_whose_codebase_is_missing_is_refused_before_writing(tmp_path):
    with pytest.raises(ValueError) as err:
        sm.family_config('mmyolo-yolov8', str(tmp_path / 'family'), str(tmp_path))
    assert str(err.value) == ('family mmyolo-yolov8 needs mmyolo, which this environment '
                              'does not have; install it (docs/install.md) or leave the '
                              'family out')
    assert os.listdir(tmp_path) == []
