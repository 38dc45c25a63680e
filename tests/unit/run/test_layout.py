"""run.layout: a layout's global batch, its accumulation read from an optimizer wrapper,
and the error for a layout that misses randomness.global_batch."""
import pytest

from mmrepro.run.layout import Layout, accumulative_counts, check_global_batch, step_and_slice


def test_a_layout_counts_slices_and_samples_per_global_batch():
    layout = Layout(2, rank=1, world_size=2, accumulation=4)
    assert (layout.slices, layout.global_batch) == (8, 16)
    assert step_and_slice(9, 1, 4) == (2, 5)  # micro-batch 1 of step 2, rank 1's second


def test_accumulative_counts_of_configs_and_wrappers():
    assert accumulative_counts(dict(type='OptimWrapper', optimizer={},
                                    accumulative_counts=4)) == 4
    assert accumulative_counts(dict(optimizer={})) == 1
    assert accumulative_counts(dict(a=dict(optimizer={}, accumulative_counts=2),
                                    b=dict(optimizer={}, accumulative_counts=2))) == 2


def test_a_layout_that_misses_the_global_batch_is_an_error():
    check_global_batch(16, Layout(2, world_size=2, accumulation=4))  # 2 x 2 x 4
    check_global_batch(None, Layout(3, world_size=5))
    with pytest.raises(ValueError) as info:
        check_global_batch(16, Layout(2, world_size=2))
    assert str(info.value) == (
        'randomness.global_batch=16, but this run trains 2 rank(s) x batch_size 2 x '
        'accumulative_counts 1 = 4 samples per optimizer step. Set '
        'train_dataloader.batch_size x optim_wrapper.accumulative_counts to 8 for 2 rank(s).')
    with pytest.raises(ValueError) as info:
        check_global_batch(16, Layout(2, world_size=3))
    assert str(info.value).endswith(
        '= 6 samples per optimizer step. 16 is not a multiple of 3 ranks, so no batch size '
        'gives it: launch a number of ranks that divides 16.')
