"""data.data_position: a position's format, its checks, its conversion to a rank's batches,
and the holder a sampler keeps it in."""
import pytest

from mmrepro.data.data_position import (
    DataPosition,
    local_position,
    position_problem,
    rank_position,
)

#: Malformed positions: each is named by position_problem and refused by local_position.
MALFORMED = [
    None, [], dict(epoch=0), dict(epoch=-1, batches=0, unit='rank'),
    dict(epoch=0, batches=1), dict(epoch=0, batches=1, unit='step'),
    dict(epoch=0, global_batches=1, global_batch=0),
    dict(epoch=0, global_batches=True, global_batch=4),
    dict(epoch=0, global_batches=1, global_batch=4, micro_batches=2, micro=2),
    dict(epoch=0, global_batches=1, global_batch=4, micro_batches=1),
    dict(epoch=0, global_batches=1, global_batch=4, extra=1),
]


def _two_per_step(global_batch):
    return 2


@pytest.mark.parametrize('state', MALFORMED)
def test_malformed_positions_are_named(state):
    assert position_problem(state).startswith('position ')
    with pytest.raises(ValueError, match=r'^mmrepro: cannot position the train loader: '
                       r'position '):
        local_position(state, _two_per_step)


def test_well_formed_positions_have_no_problem():
    assert rank_position(2, 3) == dict(epoch=2, batches=3, unit='rank')
    for state in (rank_position(0, 0), dict(epoch=1, global_batches=3, global_batch=4),
                  dict(epoch=0, global_batches=2, global_batch=4, micro_batches=1, micro=2)):
        assert position_problem(state) is None


def test_a_position_converts_into_the_ranks_batches():
    assert local_position(rank_position(2, 3), _two_per_step) == (2, 3)  # as it is
    assert local_position(dict(epoch=1, global_batches=3, global_batch=4),
                          _two_per_step) == (1, 6)
    assert local_position(dict(epoch=0, global_batches=2, global_batch=4, micro_batches=1,
                               micro=2), _two_per_step) == (0, 5)
    with pytest.raises(ValueError, match=(
            r'^mmrepro: cannot position the train loader: the position is 1 of 2 '
            r'micro-batches into an optimizer step, not at a step boundary, and this run '
            r'takes 1 per step\.$')):
        local_position(dict(epoch=0, global_batches=2, global_batch=4, micro_batches=1,
                            micro=2), lambda global_batch: 1)


def test_the_holder_applies_a_loaded_position_once_to_its_epoch():
    position = DataPosition()
    assert position.consumed is None and position.take(0) == (0, None)
    position.consume(0, 4)
    assert position.consumed == (0, 4) and position.loaded is None
    position.load(1, 2)
    assert position.consumed == position.loaded == (1, 2)
    assert position.start(1) == 2 and position.start(0) == 0
    assert position.take(1) == (2, None)
    assert position.start(1) == 0 and position.take(1) == (0, None)  # applied once
    position.load(3, 2)
    assert position.take(0) == (0, 3)  # another epoch: nothing skipped, said
