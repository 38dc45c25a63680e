"""mmrepro.data.seeded_index: a dataset index that carries its sample's key."""
import pickle

from mmrepro.data.seeded_index import SeededIndex


def test_seeded_index_is_an_int_and_pickles_with_its_key():
    idx = SeededIndex(5, (1, 2, 3))
    assert idx == 5 and idx + 1 == 6 and [10, 11, 12, 13, 14, 15][idx] == 15
    back = pickle.loads(pickle.dumps(idx))
    assert isinstance(back, SeededIndex) and back == 5 and back.key == (1, 2, 3)
