"""data.eval_batch_sampler: evaluation batches the same on any number of ranks, and the
indices MMEngine's DefaultSampler gives each rank (what ``collect_results`` assumes)."""
from itertools import zip_longest

import pytest
from mmengine.dataset import DefaultSampler
from mmengine.registry import DATA_SAMPLERS
from torch.utils.data import BatchSampler

from mmrepro.data import EvalBatchSampler, RankBatchSampler
from mmrepro.data.eval_batch_sampler import default_sampler_share
from mmrepro.data.sampler_isolation import needs_isolation


def _ranks(size, batch_size, world_size):
    """Each rank's batches, from a real DefaultSampler over ``range(size)``."""
    return [list(EvalBatchSampler(DefaultSampler(range(size), shuffle=False), batch_size,
                                  rank=rank, world_size=world_size))
            for rank in range(world_size)]


def _interleaved(shares, size):
    """What MMEngine's ``collect_results`` does with the ranks' parts (0.10.x)."""
    return [i for part in zip_longest(*shares) for i in part if i is not None][:size]


def test_one_rank_batches_exactly_as_mmengine():
    for size, batch_size in ((8, 2), (7, 3), (5, 1), (2, 4)):
        sampler = DefaultSampler(range(size), shuffle=False)
        mmengine = [list(b) for b in BatchSampler(sampler, batch_size, drop_last=False)]
        ours = EvalBatchSampler(sampler, batch_size)
        assert (ours.rank, ours.world_size, ours.size) == (0, 1, size)
        assert list(ours) == mmengine and len(ours) == len(mmengine)


def test_ranks_take_whole_global_batches_in_turn():
    assert _ranks(8, 2, 1) == [[[0, 1], [2, 3], [4, 5], [6, 7]]]
    assert _ranks(8, 2, 2) == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]
    assert _ranks(8, 2, 3) == [[[0, 1], [6, 7]], [[2, 3]], [[4, 5]]]
    # 7 samples: a short last batch, and unequal counts between ranks.
    assert _ranks(7, 3, 2) == [[[0, 1, 2], [6]], [[3, 4, 5]]]
    assert _ranks(7, 2, 3) == [[[0, 1], [6]], [[2, 3]], [[4, 5]]]
    assert _ranks(3, 2, 3) == [[[0, 1]], [[2]], []]  # a rank with nothing to do


@pytest.mark.parametrize('size,batch_size,world_size', [
    (8, 2, 1), (8, 2, 2), (8, 2, 3), (7, 3, 2), (7, 2, 3), (3, 2, 3), (1, 4, 2)])
def test_every_index_once_and_lengths(size, batch_size, world_size):
    ranks = _ranks(size, batch_size, world_size)
    batches = [batch for rank in ranks for batch in rank]
    assert sorted(batches) == EvalBatchSampler(range(0), batch_size, size=size).global_batches()
    assert sorted(i for batch in batches for i in batch) == list(range(size))
    for rank, mine in enumerate(ranks):
        sampler = EvalBatchSampler(DefaultSampler(range(size), shuffle=False), batch_size,
                                   rank=rank, world_size=world_size)
        assert len(sampler) == len(mine)
        assert sampler.indices() == [i for batch in mine for i in batch]


def test_default_sampler_share_pins_mmengines_assignment():
    assert list(DefaultSampler(range(5), shuffle=False)) == default_sampler_share(5, 0, 1)
    # round_up: 7 samples on 3 ranks are padded to 9 by wrapping to indices 0 and 1.
    assert [default_sampler_share(7, r, 3) for r in range(3)] == [
        [0, 3, 6], [1, 4, 0], [2, 5, 1]]
    assert [default_sampler_share(7, r, 3, round_up=False) for r in range(3)] == [
        [0, 3, 6], [1, 4], [2, 5]]
    assert [default_sampler_share(2, r, 3) for r in range(3)] == [[0], [1], [0]]
    assert [default_sampler_share(1, r, 4) for r in range(4)] == [[0], [0], [0], [0]]
    assert default_sampler_share(0, 1, 2) == []


@pytest.mark.parametrize('round_up', [True, False])
@pytest.mark.parametrize('size,world_size', [(8, 2), (7, 3), (2, 3), (9, 4), (1, 2)])
def test_interleaving_the_shares_gives_the_dataset_order(size, world_size, round_up):
    shares = [default_sampler_share(size, r, world_size, round_up) for r in range(world_size)]
    assert _interleaved(shares, size) == list(range(size))


def test_registered_and_built_by_mmengines_builder_with_the_loaders_sampler():
    sampler = DefaultSampler(range(5), shuffle=False)
    built = DATA_SAMPLERS.build(dict(type='EvalBatchSampler'),
                                default_args=dict(sampler=sampler, batch_size=2))
    assert isinstance(built, EvalBatchSampler) and built.sampler is sampler
    assert list(built) == [[0, 1], [2, 3], [4]]
    assert not needs_isolation(built)  # draws nothing: no host RNGs of its own needed


def test_keys_follow_the_index_not_the_rank():
    def keys(world_size):
        found = {}
        for rank in range(world_size):
            inner = EvalBatchSampler(range(7), 2, size=7, rank=rank, world_size=world_size)
            for batch in RankBatchSampler(inner, 5, rank, world_size):
                found.update({int(i): i.key for i in batch})
        return found

    one = keys(1)
    assert sorted(one) == list(range(7))
    assert keys(2) == keys(3) == one


@pytest.mark.parametrize('batch_size', [0, -1, 1.5, True, None])
def test_a_bad_batch_size_is_refused_in_one_line(batch_size):
    with pytest.raises(ValueError) as err:
        EvalBatchSampler(range(4), batch_size, size=4)
    assert str(err.value) == (
        f"EvalBatchSampler: batch_size={batch_size!r}, expected a positive int; fix: set "
        "the loader's batch_size to 1 or more.")


def test_a_rank_outside_the_world_is_refused():
    with pytest.raises(ValueError, match=r'rank=2 with world_size=2, expected 0 <= rank'):
        EvalBatchSampler(range(4), 2, size=4, rank=2, world_size=2)
