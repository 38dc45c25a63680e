"""make_reproducible on real torch DataLoaders with mmengine samplers (no model)."""
import random

import numpy as np
import pytest
import torch
from mmengine.dataset import DefaultSampler, InfiniteSampler
from torch.utils.data import DataLoader, Dataset

from mmrepro.data import make_reproducible
from mmrepro.data.data_position import rank_position


class RandomAugDataset(Dataset):
    """Returns the index and draws from all three host RNGs, like an aug pipeline."""

    def __len__(self):
        return 12

    def __getitem__(self, idx):
        return (int(idx), random.random(), float(np.random.rand()), float(torch.rand(1)))


def _collate(batch):
    return batch


def _loader(num_workers, persistent=False, seed=0, epoch_sampler=DefaultSampler,
            diff_rank_seed=False):
    dataset = RandomAugDataset()
    sampler = epoch_sampler(dataset, shuffle=True, seed=seed)
    loader = DataLoader(dataset, sampler=sampler, batch_size=3, num_workers=num_workers,
                        persistent_workers=persistent, collate_fn=_collate)
    return make_reproducible(loader, dict(seed=seed, diff_rank_seed=diff_rank_seed)), sampler


def _epochs(loader, sampler, n=2):
    out = []
    for epoch in range(n):
        sampler.set_epoch(epoch)
        out.append([item for batch in loader for item in batch])
    return out


@pytest.mark.parametrize('num_workers, persistent', [(1, False), (2, True), (4, False)])
def test_augmentation_independent_of_workers(num_workers, persistent):
    reference = _epochs(*_loader(0))
    assert _epochs(*_loader(num_workers, persistent)) == reference


def test_new_streams_every_epoch_and_per_seed():
    (e0, e1) = _epochs(*_loader(0))
    draws = {item[0]: item[1:] for item in e0}
    assert all(draws[item[0]] != item[1:] for item in e1)  # same sample, new epoch
    (o0, _) = _epochs(*_loader(0, seed=1))
    other = {item[0]: item[1:] for item in o0}
    assert all(draws[i] != other[i] for i in draws)


def test_main_process_rng_untouched_with_zero_workers():
    torch.manual_seed(3)
    random.seed(3)
    np.random.seed(3)
    np.random.normal()  # a cached Gaussian is part of numpy's state too
    before = _public_states()
    loader, sampler = _loader(0)
    _epochs(loader, sampler)
    after = _public_states()
    assert before[0] == after[0]
    assert np.array_equal(before[1][1], after[1][1]) and before[1][2:] == after[1][2:]
    assert before[1][3] == 1
    assert torch.equal(before[2], after[2])


def _public_states():
    return random.getstate(), np.random.get_state(), torch.get_rng_state()


def test_infinite_sampler_stream_and_resume_skip():
    loader, _ = _loader(0, epoch_sampler=InfiniteSampler)
    it = iter(loader)
    full = [next(it) for _ in range(10)]
    loader2, _ = _loader(2, epoch_sampler=InfiniteSampler)
    loader2.batch_sampler.load_state_dict(rank_position(0, 6))
    it2 = iter(loader2)
    assert [next(it2) for _ in range(4)] == full[6:]


def test_epoch_resume_skips_at_index_level():
    loader, sampler = _loader(0)
    sampler.set_epoch(1)
    full = list(loader)
    loader2, sampler2 = _loader(2)
    sampler2.set_epoch(1)
    loader2.batch_sampler.load_state_dict(rank_position(1, 2))
    assert list(loader2) == full[2:]


def test_loader_generator_isolates_global_torch_rng():
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    loader, _ = _loader(2)
    for _ in range(2):
        list(loader)  # each iterator draws a worker base seed from the loader's generator
    assert torch.equal(torch.rand(1), expected)


def test_diff_rank_seed_changes_augmentation():
    (a,) = _epochs(*_loader(0), n=1)
    (b,) = _epochs(*_loader(0, diff_rank_seed=True), n=1)
    assert [x[0] for x in a] == [x[0] for x in b] and a != b


def test_sampler_attribute_preserved():
    loader, sampler = _loader(0)
    assert loader.sampler is sampler and loader.batch_sampler.sampler is sampler
    assert len(loader) == 4


def test_batch_size_and_drop_last_read_as_mmengine_built_them():
    """Rebuilt around a batch sampler, the loader still says its batch size (mmpretrain's
    PreciseBNHook divides by it) and ``drop_last``, and batches as they say."""
    loader, _ = _loader(0)
    assert (loader.batch_size, loader.drop_last) == (3, False)
    assert [len(batch) for batch in loader] == [3, 3, 3, 3]


def test_second_loader_over_a_patched_dataset_draws_anew_each_batch():
    """A plain DataLoader (no keyed indices) over the same dataset advances the streams.

    Before the fix, the main-process RNG states were restored after every batch even
    when nothing was seeded, so all 4 batches got the same draws.
    """
    seeded, _ = _loader(0)
    plain = DataLoader(seeded.dataset, batch_size=3, shuffle=False, num_workers=0,
                       collate_fn=_collate)
    set_random = (random.seed, np.random.seed, torch.manual_seed)
    for fn in set_random:
        fn(0)
    draws = [tuple(item[1:] for item in batch) for batch in plain]
    assert len(draws) == 4
    assert len(set(d[0] for d in draws)) == 4  # first sample of each batch: new draws
    # ... and exactly what the same loader gives over an unpatched dataset.
    for fn in set_random:
        fn(0)
    unpatched = DataLoader(RandomAugDataset(), batch_size=3, shuffle=False, num_workers=0,
                           collate_fn=_collate)
    assert draws == [tuple(item[1:] for item in batch) for batch in unpatched]


def test_the_global_stream_needs_this_ranks_layout():
    dataset = RandomAugDataset()
    loader = DataLoader(dataset, batch_size=3, collate_fn=_collate)
    batches = loader.batch_sampler
    with pytest.raises(ValueError, match=r'^make_reproducible: global_batches needs the '
                       r'layout that takes its slices \(layout=Layout\(batch_size, rank, '
                       r'world_size, accumulation\)\), got layout=None\.$'):
        make_reproducible(loader, dict(seed=0), global_batches=batches)


def test_the_settings_and_the_layout_say_the_seed_and_the_rank():
    from mmrepro.rng.keys import LOADER, derive_seed
    from mmrepro.run.layout import Layout
    from mmrepro.run.settings import RunSettings
    loader = DataLoader(RandomAugDataset(), batch_size=3, collate_fn=_collate)
    built = make_reproducible(loader, RunSettings(seed=4, diff_rank_seed=True),
                              Layout(3, rank=1, world_size=2))
    sampler = built.batch_sampler
    assert (sampler.seed, sampler.rank, sampler.world_size) == (4, 1, 2)
    assert sampler.diff_rank_seed is True
    assert built.generator.initial_seed() == derive_seed(LOADER, 4, 1)
    plain = make_reproducible(loader, dict(seed=4))  # a randomness dict; rank 0 of 1
    assert (plain.batch_sampler.rank, plain.batch_sampler.world_size) == (0, 1)
    assert plain.batch_sampler.diff_rank_seed is False
    with pytest.raises(ValueError, match=r'^make_reproducible: the settings have no seed '
                       r'\(seed=None\); give the run.s seed'):
        make_reproducible(loader, RunSettings())
    with pytest.raises(ValueError, match=r"^Unknown key\(s\) \['sead'\] in `randomness`"):
        make_reproducible(loader, dict(sead=4))
