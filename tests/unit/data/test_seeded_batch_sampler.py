"""The batch sampler's position as a part of the resume state: global units, round trips."""
import logging

import pytest
import torch
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

from mmrepro.data import GlobalBatchSampler, RankBatchSampler
from mmrepro.data.data_position import position_problem, rank_position
from mmrepro.rng.keys import sample_key
from mmrepro.run.layout import Layout

SEED = 5


def _sampler(batch_size, world_size=1, micro=1, rank=0, global_stream=True):
    """A sampler over 32 indices in order; with the global stream, global batches of
    ``batch_size x world_size x micro``."""
    local = BatchSampler(SequentialSampler(range(32)), batch_size, drop_last=False)
    if not global_stream:
        return RankBatchSampler(local, SEED, rank, world_size)
    size = batch_size * world_size * micro
    batches = BatchSampler(SequentialSampler(range(32)), size, drop_last=False)
    return GlobalBatchSampler(local, batches, Layout(batch_size, rank, world_size, micro), SEED)


def _indices(sampler):
    return [[int(i) for i in batch] for batch in sampler]


def test_position_is_in_global_batches_and_round_trips():
    sampler = _sampler(2, micro=2)
    assert sampler.state_dict() == dict(epoch=0, global_batches=0, global_batch=4)
    sampler.consume(1, 6)
    state = sampler.state_dict()
    assert state == dict(epoch=1, global_batches=3, global_batch=4)
    assert position_problem(state) is None
    fresh = _sampler(2, micro=2)
    fresh.load_state_dict(state)
    assert fresh.positioned_at((1, 6))
    assert fresh.state_dict() == state


def test_a_position_between_optimizer_steps_round_trips_on_its_own_layout():
    sampler = _sampler(2, micro=2)
    sampler.consume(0, 5)
    state = sampler.state_dict()
    assert state == dict(epoch=0, global_batches=2, global_batch=4, micro_batches=1, micro=2)
    fresh = _sampler(2, micro=2)
    fresh.load_state_dict(state)
    assert fresh.positioned_at((0, 5))
    assert fresh.state_dict() == state
    other = _sampler(2, world_size=2)  # the same global batch, one micro-batch a step
    with pytest.raises(ValueError, match='not at a step boundary'):
        other.load_state_dict(state)


def test_another_layout_of_the_same_global_batch_continues_the_stream():
    writer = _sampler(2, micro=2)
    writer.consume(0, 4)  # two optimizer steps: samples 0-7
    state = writer.state_dict()
    for batch_size, world_size, micro in ((4, 1, 1), (1, 2, 2), (1, 1, 4)):
        reader = _sampler(batch_size, world_size, micro)
        reader.load_state_dict(state)
        assert reader.positioned_at((0, 2 * micro))
        assert _indices(reader)[0] == list(range(8, 8 + batch_size))


def test_another_global_batch_is_refused():
    writer = _sampler(2, micro=2)
    writer.consume(0, 4)
    with pytest.raises(ValueError, match='global batches of 4 samples, this run.s are 8'):
        _sampler(4, micro=2).load_state_dict(writer.state_dict())


def test_without_the_global_stream_the_position_is_in_the_rank_s_batches():
    sampler = _sampler(4, world_size=2, global_stream=False)
    sampler.consume(2, 3)
    state = sampler.state_dict()
    assert state == dict(epoch=2, batches=3, unit='rank') == rank_position(2, 3)
    fresh = _sampler(4, world_size=2, global_stream=False)
    fresh.load_state_dict(state)
    assert fresh.positioned_at((2, 3)) and fresh.state_dict() == state
    # A position in a rank's batches is taken as it is (same layout, checked by the caller).
    stream = _sampler(4)
    stream.load_state_dict(dict(epoch=0, batches=3, unit='rank'))
    assert _indices(stream) == [list(range(12 + 4 * n, 16 + 4 * n)) for n in range(5)]


def test_a_positioned_pass_skips_the_consumed_batches():
    sampler = _sampler(2, micro=2)
    whole = _indices(sampler)
    sampler.load_state_dict(dict(epoch=0, global_batches=3, global_batch=4))
    assert _indices(sampler) == whole[6:]
    assert _indices(sampler) == whole  # only the next pass


@pytest.mark.parametrize('state', [None, dict(epoch=0, batches=1)])  # (data_position's)
def test_malformed_positions_are_refused(state):
    assert position_problem(state).startswith('position ')
    with pytest.raises(ValueError, match='cannot position the train loader: position '):
        _sampler(2).load_state_dict(state)


# ------------------------------------------------------------- keys, slices, isolation
def test_every_index_carries_the_key_of_its_place_in_the_epochs_stream():
    sampler = _sampler(4, world_size=2, rank=1, global_stream=False)
    first = next(iter(sampler))
    assert [int(i) for i in first] == [0, 1, 2, 3]  # the wrapped sampler's batch, as is
    # local positions 0..3 of rank 1 of 2: global positions 1, 3, 5, 7; rank not mixed in
    assert [i.key for i in first] == [sample_key(SEED, 0, 2 * n + 1, n) for n in range(4)]
    mixed = RankBatchSampler(BatchSampler(SequentialSampler(range(32)), 4, False), SEED,
                             rank=1, world_size=2, diff_rank_seed=True)
    assert [i.key for i in next(iter(mixed))] == [sample_key(SEED, 0, 2 * n + 1, n, 1)
                                                  for n in range(4)]


def test_each_rank_takes_its_slice_of_every_global_batch():
    ranks = [_indices(_sampler(2, world_size=2, rank=r)) for r in (0, 1)]
    assert ranks[0][:2] == [[0, 1], [4, 5]] and ranks[1][:2] == [[2, 3], [6, 7]]
    one = _indices(_sampler(2, micro=2))  # 1 process x 2 micro-batches: the same slices
    assert one[:4] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    keys = [[i.key for i in batch] for batch in _sampler(2, world_size=2, rank=1)]
    assert keys[0] == [sample_key(SEED, 0, p, p) for p in (2, 3)]  # global places 2, 3


def test_len_counts_micro_batches_or_optimizer_steps():
    sampler = _sampler(2, micro=2)  # global batches of 4: 8 of them
    assert len(sampler) == 16
    with sampler.counting_steps():
        assert len(sampler) == 8
    assert len(sampler) == 16
    assert len(_sampler(4, global_stream=False)) == 8
    assert sampler.batch_size == 2 and sampler.drop_last is False  # this rank's sampler's
    assert not hasattr(_sampler(4, global_stream=False), 'counting_steps')


def test_the_pending_position_is_read_by_the_loop_and_applied_once():
    sampler = _sampler(2, micro=2)
    whole = _indices(sampler)
    sampler.load_state_dict(dict(epoch=0, global_batches=1, global_batch=4))
    assert sampler.epoch_start() == 2 and sampler.epoch_start(0) == 2
    assert sampler.epoch_start(1) == 0
    assert _indices(sampler) == whole[2:]
    assert sampler.epoch_start() == 0  # applied: the next pass is whole
    assert sampler.state_dict() == dict(epoch=0, global_batches=1, global_batch=4)


def test_a_position_in_another_epoch_skips_nothing():
    sampler = _sampler(2, micro=2)
    whole = _indices(sampler)
    sampler.load_state_dict(rank_position(3, 2))  # the sampler is at epoch 0
    assert sampler.epoch_start() == 0
    assert _indices(sampler) == whole
    assert sampler.positioned_at((3, 2)) and sampler.epoch_start(3) == 0  # taken


class _EpochSampler(SequentialSampler):
    """A sampler that keeps its epoch, as MMEngine's do."""

    epoch = 0


@pytest.mark.parametrize('source,message', [
    (SequentialSampler, 'mmrepro: the data position to resume is in epoch 1, but '
     'SequentialSampler keeps no epoch (its set_epoch sets no `epoch`), so its passes '
     'cannot be told apart: not skipping any batch, and this resume is not exact.'),
    (_EpochSampler, 'mmrepro: the data position to resume is in epoch 1 but the sampler '
     'is at epoch 0; not skipping any batch.'),
])
def test_a_position_the_pass_cannot_take_is_named_with_why(source, message, caplog):
    """A sampler without an epoch (mmpose's MultiSourceSampler sets none) cannot be
    positioned: the warning says so, and that the resume is not exact."""
    logger = logging.getLogger('mmrepro.test.position')
    sampler = RankBatchSampler(BatchSampler(source(range(8)), 2, False), SEED, logger=logger)
    sampler.load_state_dict(rank_position(1, 1))
    with caplog.at_level(logging.WARNING, logger=logger.name):
        assert len(_indices(sampler)) == 4  # nothing skipped
    assert caplog.messages == [message]


def test_a_sampler_drawing_from_the_global_rng_is_isolated():
    def shuffled(seed):
        return RankBatchSampler(BatchSampler(RandomSampler(range(32)), 4, False), seed)

    torch.manual_seed(0)
    before = torch.get_rng_state()
    order = _indices(shuffled(SEED))
    assert torch.equal(torch.get_rng_state(), before)  # the model's draws do not move
    torch.manual_seed(123)
    assert _indices(shuffled(SEED)) == order  # (seed, epoch) alone decide the order
    assert _indices(shuffled(SEED + 1)) != order
    assert sorted(i for batch in order for i in batch) == list(range(32))
