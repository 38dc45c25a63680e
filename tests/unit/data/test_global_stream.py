"""One global batch stream: every layout of ranks x micro-batches trains on the same batches."""
import pytest
from mmengine.dataset import DefaultSampler
from mmengine.registry import DATASETS
from mmengine.runner import Runner
from support.mmdet_data import coco, loader_cfg

from mmrepro.data import GlobalBatchSampler
from mmrepro.data.global_stream import build_global_batch_sampler, micro_batches
from mmrepro.run.layout import Layout

SEED = 5
ASPECT = dict(type='AspectRatioBatchSampler')
#: (batch size, ranks, micro-batches): global batch 4 in every layout.
LAYOUTS = [(4, 1, 1), (2, 2, 1), (1, 4, 1), (2, 1, 2), (1, 2, 2), (1, 1, 4)]


def test_slices_positions_and_completion():
    batches = [[10, 11, 12, 13], [14, 15, 16, 17], [18, 19]]
    rank1 = list(micro_batches(batches, Layout(1, rank=1, world_size=2, accumulation=2), history=3))
    assert [[(p, i) for p, i, _ in slots] for slots in rank1] == [
        [(2, 12)], [(3, 13)], [(6, 16)], [(7, 17)], [(10, 10)], [(11, 11)]]
    # The samples just before it in the global stream, whichever rank trains on them.
    assert rank1[0][0][2] == ((0, 10), (1, 11))
    assert rank1[2][0][2] == ((3, 13), (4, 14), (5, 15))
    whole = list(micro_batches(batches, Layout(4), complete=False))
    assert [[i for _, i, _ in slots] for slots in whole] == batches


def _dataset(data_root):
    return DATASETS.build(coco(data_root, [dict(type='LoadImageFromFile')]))


def _stream(data_root, layout, sampler=None, epoch=0):
    """Keys of every micro-batch, per global batch: {iteration: [keys of slice 0, ...]}."""
    batch, world, micro = layout
    dataset = _dataset(data_root)
    cfg = loader_cfg(dataset, sampler, batch_sampler=ASPECT)
    cfg['batch_size'] = batch
    per_global = {}
    for rank in range(world):
        rank_sampler = DefaultSampler(dataset, shuffle=True, seed=SEED)
        rank_sampler.set_epoch(epoch)  # what DistSamplerSeedHook sets
        local = Runner.build_dataloader(dict(cfg, sampler=rank_sampler), seed=SEED)
        global_batches = build_global_batch_sampler(cfg, dataset, SEED, batch * world * micro)
        seeded = GlobalBatchSampler(local.batch_sampler, global_batches,
                                    Layout(batch, rank, world, micro), SEED)
        assert len(seeded) == 4 * micro  # ceil(16 / 4) global batches
        for n, indices in enumerate(seeded):
            per_global.setdefault(n // micro, {})[rank * micro + n % micro] = [
                index.key for index in indices]
    return {g: [key for v in sorted(s) for key in s[v]] for g, s in per_global.items()}


@pytest.mark.parametrize('layout', LAYOUTS[1:], ids=str)
def test_every_layout_trains_on_the_same_batches(data_root, layout):
    reference = _stream(data_root, LAYOUTS[0])
    assert len(reference) == 4 and all(len(keys) == 4 for keys in reference.values())
    assert _stream(data_root, layout) == reference


def test_global_batches_share_an_aspect_group(data_root):
    dataset = _dataset(data_root)
    infos = [dataset.get_data_info(i) for i in range(len(dataset))]
    tall = {i for i, info in enumerate(infos) if info['width'] < info['height']}
    groups = [{key[4] in tall for key in keys} for keys in _stream(data_root, (2, 2, 1))
              .values()]
    # The leftovers of both groups come last, as AspectRatioBatchSampler yields them.
    assert all(len(group) == 1 for group in groups[:-1]), groups


def test_epoch_comes_from_the_rank_sampler(data_root):
    assert _stream(data_root, (2, 2, 1), epoch=3) == _stream(data_root, (4, 1, 1), epoch=3)
    assert _stream(data_root, (4, 1, 1), epoch=3) != _stream(data_root, (4, 1, 1))


