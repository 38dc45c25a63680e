"""mmrepro.data.wrappers: a dataset and every dataset it wraps, depth first."""
from mmengine.dataset import BaseDataset, RepeatDataset
from torch.utils.data import ConcatDataset

from mmrepro.data.wrappers import MAX_DEPTH, wrapped_datasets


class _Numbers(BaseDataset):
    def load_data_list(self):
        return [dict(value=i) for i in range(3)]


def test_a_plain_dataset_is_its_own_only():
    a = _Numbers()
    assert list(wrapped_datasets(a)) == [a]
    assert list(wrapped_datasets(None)) == []


def test_wrappers_are_followed_through_dataset_and_datasets_depth_first():
    a, b = _Numbers(), _Numbers()
    repeated = RepeatDataset(a, times=2)
    both = ConcatDataset([repeated, b])
    assert len(both) == 9
    found = list(wrapped_datasets(both))
    assert [type(d).__name__ for d in found] == ['ConcatDataset', 'RepeatDataset', '_Numbers',
                                                 '_Numbers']
    assert found[1] is repeated and found[2] is a and found[3] is b


def test_wrappers_are_followed_max_depth_levels_down():
    inner = _Numbers()
    chain = [inner]
    for _ in range(MAX_DEPTH + 2):
        chain.append(ConcatDataset([chain[-1]]))
    found = list(wrapped_datasets(chain[-1]))
    assert len(found) == MAX_DEPTH + 1 == 5
    assert found == chain[::-1][:MAX_DEPTH + 1] and inner not in found
