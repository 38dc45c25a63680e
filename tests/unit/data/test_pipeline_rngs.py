"""Generators a pipeline owns: albumentations' keyed per sample, any other one named."""
import logging
import pickle

import pytest
from mmengine.runner import Runner
from packaging.version import Version
from support import own_rng_transform  # noqa: F401  (registers OwnRNGNoise)
from support.mmdet_data import albu, albu_pipeline, batch_digests, coco, loader_cfg, logged

from mmrepro.data import make_reproducible
from mmrepro.data.data_position import rank_position
from mmrepro.data.pipeline_rngs import OwnedGenerator, PipelineRNGs, find_generators

albumentations = pytest.importorskip(
    'albumentations', reason='albumentations is not installed (tools/setup_env.sh installs '
    '2.0.8 on the current stack and 1.3.1 on the floor)')
#: From 1.4.21 each Compose and transform owns a random.Random and a numpy Generator;
#: before, albumentations drew from the global generators mmrepro seeds per sample.
OWNS = Version(albumentations.__version__) >= Version('1.4.21')
#: The albu_example list: a Compose and 9 transforms (2 OneOf), 2 generators each.
ALBU_GENERATORS = 20 if OWNS else 0
NOISE = OwnedGenerator(path='OwnRNGNoise.rng', owner='OwnRNGNoise.rng',
                       kind='numpy.random.Generator', keyed=False)
SCALE = (96, 80)


def _dataset(data_root, pipeline):
    from mmdet.registry import DATASETS
    return DATASETS.build(coco(data_root, pipeline))


def test_albumentations_generators_are_keyed_and_a_custom_one_is_named(data_root):
    pipeline = albu_pipeline(SCALE)
    pipeline.insert(3, dict(type='OwnRNGNoise'))
    found = [info for _, info in find_generators(_dataset(data_root, pipeline))]
    assert [g for g in found if not g.keyed] == [NOISE]
    keyed = [g for g in found if g.keyed]
    assert len(keyed) == ALBU_GENERATORS
    if OWNS:  # each transform's pair, nested ones first, then the Compose's own
        assert keyed[:2] == [
            OwnedGenerator('Albu.aug.transforms[0].random_generator',
                           'ShiftScaleRotate.random_generator', 'numpy.random.Generator', True),
            OwnedGenerator('Albu.aug.transforms[0].py_random', 'ShiftScaleRotate.py_random',
                           'random.Random', True)]
        assert keyed[4].path == 'Albu.aug.transforms[2].transforms[0].random_generator'
        assert [g.owner for g in keyed[-2:]] == ['Compose.random_generator',
                                                 'Compose.py_random']


def test_multibranch_and_dataset_wrappers_are_walked(data_root):
    from mmdet.registry import DATASETS
    branches = dict(type='MultiBranch', branch_field=['a', 'b'],
                    a=[albu(), dict(type='PackDetInputs')], b=[dict(type='PackDetInputs')])
    inner = coco(data_root, [dict(type='LoadImageFromFile'),
                             dict(type='LoadAnnotations', with_bbox=True), branches])
    wrapped = DATASETS.build(dict(type='RepeatDataset', times=2, dataset=inner))
    keyed = [info for _, info in find_generators(wrapped) if info.keyed]
    assert len(keyed) == ALBU_GENERATORS
    assert all(g.path.startswith("MultiBranch.branch_pipelines['a'].transforms[0].aug.")
               for g in keyed)




#: Albu drawing everything (p=1), then a keyed CachedMosaic: a partner is recomputed
#: through Albu from its own key, and the sample's generators are put back after it.
ALWAYS = [dict(d, p=1.0) for d in albu()['transforms']]
MOSAIC = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
          dict(type='Resize', scale=SCALE, keep_ratio=True), albu(ALWAYS),
          dict(type='CachedMosaic', img_scale=SCALE, max_cached_images=4, pad_val=114.0),
          albu(ALWAYS), dict(type='Resize', scale=SCALE, keep_ratio=False),
          dict(type='PackDetInputs')]


def _loader(data_root, pipeline, num_workers=0, keyed=True, seed=5):
    cfg = loader_cfg(coco(data_root, pipeline), num_workers=num_workers)
    cfg['collate_fn'] = dict(type='pseudo_collate')
    loader = Runner.build_dataloader(cfg, seed=seed)
    return make_reproducible(loader, dict(seed=seed)) if keyed else loader


@pytest.fixture(scope='module')
def reference(data_root):
    return batch_digests(_loader(data_root, MOSAIC))


def test_albu_draws_the_same_on_a_rebuild_and_with_2_workers(data_root, reference):
    assert len(reference) == 16 and len(set(reference)) == 16
    assert batch_digests(_loader(data_root, MOSAIC)) == reference
    assert batch_digests(_loader(data_root, MOSAIC, num_workers=2)) == reference


def test_a_partner_recomputed_through_albu_is_the_sample_it_was(data_root, reference):
    from mmrepro.data.keyed_cache import KeyedCache, pipeline_transforms
    loader = _loader(data_root, MOSAIC)
    for t in pipeline_transforms(loader.dataset):
        if isinstance(getattr(t, 'results_cache', None), KeyedCache):
            t.results_cache.memo_size = 0
    assert batch_digests(loader) == reference


def test_resumed_mid_epoch_albu_goes_on_unchanged(data_root, reference):
    loader = _loader(data_root, MOSAIC, num_workers=2)
    loader.batch_sampler.load_state_dict(rank_position(1, 3))
    assert batch_digests(loader, epochs=(1,)) == reference[8 + 3:]


@pytest.mark.skipif(not OWNS, reason='albumentations before 1.4.21 draws from the global '
                    'generators, which MMEngine seeds: nothing for the control to show')
def test_without_mmrepro_albu_differs_on_a_rebuild(data_root):
    # What the keying fixes: each Compose seeds its own generators from OS entropy.
    pipeline = albu_pipeline(SCALE)
    pipeline[3] = albu(ALWAYS)
    plain = [batch_digests(_loader(data_root, pipeline, keyed=False), epochs=(0,)) for _ in '12']
    assert plain[0] != plain[1]


def test_a_worker_keys_its_own_copies(data_root):
    rngs = PipelineRNGs(_dataset(data_root, albu_pipeline(SCALE)))
    rngs.refresh()
    copy = pickle.loads(pickle.dumps(rngs))
    assert copy.found == [] and copy._keyed == []
    copy.refresh()
    assert len(copy._keyed) == len(rngs._keyed) == ALBU_GENERATORS
    assert not {id(g) for g in copy._keyed} & {id(g) for g in rngs._keyed}
    for each in (rngs, copy):
        each.seed((1, 5, 0, 3, 7))
    assert [g.bit_generator.state if hasattr(g, 'bit_generator') else g.getstate()
            for g in copy._keyed] == [
                g.bit_generator.state if hasattr(g, 'bit_generator') else g.getstate()
                for g in rngs._keyed]




def test_the_log_names_keyed_and_unkeyed_generators(data_root):
    pipeline = albu_pipeline(SCALE)
    pipeline.insert(3, dict(type='OwnRNGNoise'))
    messages = logged(lambda: _loader(data_root, pipeline))
    assert (logging.WARNING,
            'mmrepro: the pipeline owns generator(s) mmrepro does not key: OwnRNGNoise.rng '
            '(numpy.random.Generator); their draws change on every rerun (unless the '
            'transform seeds them), with num_workers and after a resume. Fix: draw from '
            "np.random, random or torch's default generator instead, which mmrepro seeds "
            'for every sample (randomness.strict=True refuses to train with them).'
            ) in messages
    keyed = [m for level, m in messages if m.startswith('mmrepro: keys the')]
    assert keyed == ([f'mmrepro: keys the {ALBU_GENERATORS} generator(s) that albumentations '
                      "owns in the pipeline (in Albu) from each sample's key: its draws are "
                      'the same on a rerun, with any num_workers, after resume and on every '
                      'layout.'] if OWNS else [])


def test_strict_refuses_an_unkeyed_generator_in_one_line(data_root):
    pipeline = albu_pipeline(SCALE)
    pipeline.insert(3, dict(type='OwnRNGNoise'))
    loader = Runner.build_dataloader(
        loader_cfg(coco(data_root, pipeline), num_workers=0), seed=5)
    with pytest.raises(ValueError) as err:
        make_reproducible(loader, dict(seed=5, strict=True))
    assert str(err.value) == (
        'randomness.strict=True, but the pipeline owns generator(s) mmrepro does not key: '
        'OwnRNGNoise.rng (numpy.random.Generator); their draws change on every rerun '
        '(unless the transform seeds them), with num_workers and after a resume. Fix: draw '
        "from np.random, random or torch's default generator instead, which mmrepro seeds "
        'for every sample, or set randomness.strict=False to train with a warning.')


def test_a_switched_pipeline_is_walked_again(data_root):
    """``PipelineSwitchHook`` replaces the dataset's pipeline object mid-training."""
    from mmcv.transforms import Compose
    dataset = _dataset(data_root, None)
    rngs = PipelineRNGs(dataset)
    rngs.refresh()
    assert rngs.found == []
    dataset.pipeline = Compose(albu_pipeline(SCALE))
    rngs.refresh()
    assert len(rngs._keyed) == len(rngs.found) == ALBU_GENERATORS
