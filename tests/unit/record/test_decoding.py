"""mmrepro.record.decoding: the decoders' versions and the decoded-sample canary."""
from __future__ import annotations

import random

import cv2
import mmcv
import numpy as np
import pytest
import torch
from mmcv.transforms import BaseTransform
from mmengine.config import Config
from mmengine.registry import DATASETS, TRANSFORMS, init_default_scope
from support.mmdet_data import albu, coco
from support.repro_utils import CONFIGS

from mmrepro.record.decoding import (
    decode_canary,
    decoding_record,
    decoding_versions,
    is_random,
    opencv_codecs,
)

LOAD = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True)]
#: A pipeline with a deterministic Resize before its random transforms.
RESIZED = [*LOAD, dict(type='Resize', scale=(96, 80), keep_ratio=True),
           dict(type='RandomFlip', prob=0.5), dict(type='PhotoMetricDistortion'),
           dict(type='PackDetInputs')]


class Jitter(BaseTransform):
    """Draws from every host RNG though nothing marks it random: the canary runs it."""

    def transform(self, results):
        noise = random.random() + np.random.rand() + torch.rand(()).item()
        results['img'] = results['img'] + np.float32(noise)
        return results


def _retinanet(data_root):
    """The RetinaNet config's train dataset on the generated data."""
    init_default_scope('mmdet')
    cfg = Config.fromfile(CONFIGS['retinanet']).train_dataloader.dataset
    cfg.data_root = data_root.rstrip('/') + '/'
    return DATASETS.build(cfg)


def _dataset(data_root, pipeline):
    cfg = coco(data_root, pipeline)  # sets the mmdet scope
    return DATASETS.build(cfg)


def _rng_states():
    return (random.getstate(), [np.asarray(s).tobytes() for s in np.random.get_state()],
            torch.get_rng_state().numpy().tobytes())


def test_canary_is_stable_and_stops_at_the_first_random_transform(data_root):
    dataset = _retinanet(data_root)
    canary = decode_canary(dataset)
    # tiny_coco's train pipeline: LoadImageFromFile, LoadAnnotations, RandomResize...
    assert canary == dict(samples=2, transforms=['LoadImageFromFile', 'LoadAnnotations'],
                          stopped_at='RandomResize', sha256=canary['sha256'])
    assert decode_canary(dataset) == canary
    assert decode_canary(_retinanet(data_root)) == canary  # reloaded
    repeated = DATASETS.build(dict(type='RepeatDataset', times=2, dataset=dataset))
    assert decode_canary(repeated) == canary
    assert decode_canary(dataset, count=3)['sha256'] != canary['sha256']


def test_canary_covers_resize_and_stops_at_random_flip(data_root):
    canary = decode_canary(_dataset(data_root, RESIZED))
    assert canary['transforms'] == ['LoadImageFromFile', 'LoadAnnotations', 'Resize']
    assert canary['stopped_at'] == 'RandomFlip' and canary['samples'] == 2
    assert canary['sha256'] != decode_canary(_retinanet(data_root))['sha256']
    other = [*LOAD, dict(type='Resize', scale=(112, 96), keep_ratio=True), *RESIZED[3:]]
    assert decode_canary(_dataset(data_root, other))['sha256'] != canary['sha256']


def test_host_rng_states_are_untouched(data_root):
    dataset = _dataset(data_root, [*LOAD, Jitter(), dict(type='RandomFlip', prob=0.5)])
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    before = _rng_states()
    canary = decode_canary(dataset)
    assert canary['transforms'] == ['LoadImageFromFile', 'LoadAnnotations', 'Jitter']
    assert _rng_states() == before
    assert decode_canary(dataset) == canary  # the same draws again
    random.random()
    assert decode_canary(dataset)['sha256'] != canary['sha256']  # Jitter drew other noise


def test_another_decoder_changes_the_canary(data_root, monkeypatch):
    dataset = _retinanet(data_root)
    base = decode_canary(dataset)['sha256']
    decode = mmcv.imfrombytes  # LoadImageFromFile calls mmcv.imfrombytes

    def shifted(*args, **kwargs):
        img = decode(*args, **kwargs).copy()
        img[0, 0, 0] ^= 1  # one pixel decoded differently
        return img

    monkeypatch.setattr(mmcv, 'imfrombytes', shifted)
    assert decode_canary(dataset)['sha256'] != base
    monkeypatch.undo()
    assert decode_canary(dataset)['sha256'] == base


def test_random_first_transform_applies_nothing(data_root):
    dataset = _dataset(data_root, [dict(type='RandomFlip', prob=0.5), *LOAD])
    canary = decode_canary(dataset)
    assert canary['transforms'] == [] and canary['stopped_at'] == 'RandomFlip'
    assert canary['samples'] == 2


def test_failures_are_recorded_not_raised(data_root):
    cfg = coco(data_root, LOAD)
    cfg['data_prefix'] = dict(img='missing/')
    dataset = DATASETS.build(cfg)
    before = _rng_states()
    canary = decode_canary(dataset)
    assert canary['error'].startswith('FileNotFoundError: ') and _rng_states() == before
    assert decode_canary(object()) == {
        'skipped': 'no dataset with get_data_info() and a Compose pipeline'}


@pytest.mark.parametrize('cfg, random_', [
    (dict(type='LoadImageFromFile'), False),
    (dict(type='Resize', scale=(96, 80)), False),
    (dict(type='Pad', size=(96, 96)), False),
    (dict(type='PackDetInputs'), False),
    (dict(type='RandomChoiceResize', scales=[(96, 80)]), True),
    (dict(type='PhotoMetricDistortion'), True),
    (dict(type='YOLOXHSVRandomAug'), True),
    (dict(type='KeyMapper', transforms=[dict(type='RandomFlip', prob=0.5)]), True),
    (dict(type='MultiBranch', branch_field=['a'], a=[dict(type='RandomFlip', prob=0.5)]),
     True),
])
def test_is_random(cfg, random_):
    init_default_scope('mmdet')
    assert is_random(TRANSFORMS.build(cfg)) is random_


def test_a_transform_owning_its_generator_is_random():
    """Its draws differ from process to process, so the canary stops before it."""
    from support.own_rng_transform import OwnRNGNoise
    assert is_random(OwnRNGNoise())


def test_albu_is_random():
    pytest.importorskip('albumentations')
    init_default_scope('mmdet')
    assert is_random(TRANSFORMS.build(albu()))


def test_versions_name_opencv_and_its_codecs(data_root):
    versions = decoding_versions()
    assert versions['opencv'] == cv2.__version__
    assert 'JPEG' in versions['opencv_codecs'] and 'PNG' in versions['opencv_codecs']
    assert versions['mmcv_imread_backend'] == 'cv2'
    record = decoding_record(_retinanet(data_root))
    assert record == dict(versions=versions, canary=decode_canary(_retinanet(data_root)))


def test_codecs_are_parsed_from_the_media_io_section():
    info = ('  Media I/O: \n'
            '    JPEG:                        libjpeg-turbo (ver 2.1.3-62)\n'
            '      SIMD Support:              YES\n'
            '    OpenEXR:                     NO\n'
            '\n'
            '  Video I/O:\n'
            '    FFMPEG:                      YES\n')
    assert opencv_codecs(info) == {'JPEG': 'libjpeg-turbo (ver 2.1.3-62)', 'OpenEXR': 'NO'}
    assert opencv_codecs('General configuration') == {}
