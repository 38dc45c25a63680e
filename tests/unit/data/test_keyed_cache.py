"""Keyed CachedMosaic/CachedMixUp: the same samples with any num_workers and after resume."""

import pytest
from mmengine.runner import Runner
from support.mmdet_data import batch_digests, coco, loader_cfg, logged

from mmrepro.data import make_reproducible
from mmrepro.data.data_position import rank_position
from mmrepro.data.keyed_cache import KeyedCache, pipeline_transforms

#: RTMDet's stage-1 pipeline at the generated data's size, with small caches so that
#: an epoch of 16 images mixes: a mix-up partner is itself a mosaic.
RTMDET = [
    dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
    dict(type='CachedMosaic', img_scale=(96, 80), max_cached_images=5, pad_val=114.0),
    dict(type='RandomResize', scale=(192, 160), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=(96, 80)),
    dict(type='YOLOXHSVRandomAug'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='Pad', size=(96, 80), pad_val=dict(img=(114, 114, 114))),
    dict(type='CachedMixUp', img_scale=(96, 80), ratio_range=(1.0, 1.0), max_cached_images=3,
         random_pop=False, pad_val=(114, 114, 114), prob=1.0),
    dict(type='PackDetInputs'),
]


def _loader(data_root, num_workers=0, keyed=True, seed=3):
    cfg = loader_cfg(coco(data_root, RTMDET), num_workers=num_workers)
    cfg['collate_fn'] = dict(type='pseudo_collate')
    return make_reproducible(Runner.build_dataloader(cfg, seed=seed),
                             dict(seed=seed, keyed_cache=keyed))




@pytest.fixture(scope='module')
def reference(data_root):
    """The keyed stream of two epochs with num_workers=0."""
    return batch_digests(_loader(data_root))


def test_keyed_mosaic_and_mixup_are_the_same_for_0_and_2_workers(data_root, reference):
    assert len(reference) == 16
    assert batch_digests(_loader(data_root, num_workers=2)) == reference


def test_per_worker_caches_differ_between_0_and_2_workers(data_root):
    # What the keyed mode fixes: MMDetection's caches follow the workers.
    plain = [batch_digests(_loader(data_root, n, keyed=False), epochs=(0,)) for n in (0, 2)]
    assert plain[0] != plain[1]


def test_a_recomputed_partner_is_the_sample_as_it_reached_the_transform(data_root,
                                                                         reference):
    # With no memo every partner is recomputed from its key; the memo holds the
    # samples as they passed. Both give the same stream.
    loader = _loader(data_root)
    caches = [t.results_cache for t in pipeline_transforms(loader.dataset)
              if isinstance(getattr(t, 'results_cache', None), KeyedCache)]
    assert [c.size for c in caches] == [5, 3]
    for cache in caches:
        cache.memo_size = 0
    assert batch_digests(loader) == reference


def test_resumed_mid_epoch_the_stream_goes_on_unchanged(data_root, reference):
    loader = _loader(data_root, num_workers=2)
    loader.batch_sampler.load_state_dict(rank_position(1, 3))
    assert batch_digests(loader, epochs=(1,)) == reference[8 + 3:]


def test_partners_are_drawn_and_mostly_reused_in_one_process(data_root):
    loader = _loader(data_root)
    batch_digests(loader, epochs=(0,))
    mosaic, mixup = [t.results_cache for t in pipeline_transforms(loader.dataset)
                     if isinstance(getattr(t, 'results_cache', None), KeyedCache)]
    # 12 samples of 16 have 5 candidates: 3 partners each (a sample whose crop came
    # out empty is fetched again with another index and draws again).
    assert mosaic.reused + mosaic.recomputed >= 36
    assert mixup.reused + mixup.recomputed >= 14  # prob=1.0, from the 3rd sample on
    # In one process a partner was a sample just before: only nested partners of
    # mix-up partners (mosaic candidates of an earlier sample) can miss the memo.
    assert mixup.recomputed == 0 and mosaic.recomputed <= mosaic.reused




def test_the_log_says_which_transforms_are_keyed(data_root):
    assert ("mmrepro: ['CachedMixUp', 'CachedMosaic'] draw their partners by key from the "
            'previous samples of the stream (6 looked back)') in logged(
                lambda: _loader(data_root))[-1][1]


def test_per_worker_caches_are_a_warning(data_root):
    messages = [message for _, message in logged(lambda: _loader(data_root, keyed=False))]
    assert ("mmrepro: ['CachedMixUp', 'CachedMosaic'] keep a cache of earlier samples in each "
            'worker process (randomness.keyed_cache=False)') in messages[-1]
