"""mmrepro.checks.matrix.run: the zoo configs inherit mmdet's and download nothing."""
from __future__ import annotations

import pytest
from mmengine.config import Config

from mmrepro.checks.matrix import run as sm


def _values(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _values(value)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _values(value)
    else:
        yield node


@pytest.mark.parametrize('family', sm.FAMILIES)
def test_zoo_config_inherits_mmdet_and_downloads_nothing(family, data_root, monkeypatch):
    monkeypatch.setenv(sm.DATA_ENV, data_root + '/')
    path = sm.config_path(family)
    with open(path) as f:
        assert f"_base_ = ['mmdet::{sm._mmdet_base(family)}', './_base_/zoo_tiny.py']" in f.read()
    cfg = Config.fromfile(path)
    assert cfg.custom_imports == dict(imports=['mmrepro'], allow_failed_imports=False)
    assert cfg.randomness == dict(seed=0, deterministic=True)
    assert cfg.get('load_from') is None
    values = list(_values(cfg.model.to_dict()))
    assert 'Pretrained' not in values and not any(
        isinstance(v, str) and v.startswith(('http', 'torchvision://', 'open-mmlab://'))
        for v in values)
    dataset = cfg.train_dataloader.dataset
    dataset = dataset.get('dataset', dataset)  # YOLOX's MultiImageMixDataset
    assert dataset.data_root == data_root + '/'
