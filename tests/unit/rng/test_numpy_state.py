"""Direct access to numpy's global RNG state agrees with numpy's public API."""
import hashlib

import numpy as np
import pytest

from mmrepro.rng import numpy_state
from mmrepro.rng.numpy_state import (
    KEY_BYTES,
    restore_numpy_state,
    save_numpy_state,
    seed_numpy,
)

MATERIAL = hashlib.shake_128(b'test').digest(KEY_BYTES)


@pytest.fixture(params=['direct', 'public API'])
def path(request, monkeypatch):
    """Run a test on the direct path and on the public-API fallback."""
    if request.param == 'direct':
        assert numpy_state._FAST is not None, 'the pinned numpy should get the direct path'
    else:
        monkeypatch.setattr(numpy_state, '_FAST', None)
    return request.param


def _draws():
    """Draws that read every part of the state, the Gaussian cache included."""
    return (np.random.normal(), np.random.randint(0, 2**31, 5).tolist(), np.random.normal(),
            np.random.random())


def test_save_restore_round_trip_keeps_the_gaussian_cache(path):
    np.random.seed(11)
    np.random.normal()  # caches the second Gaussian of the pair: has_gauss = 1
    public = np.random.get_state()
    saved = save_numpy_state()
    expected = _draws()
    np.random.seed(99)  # anything in between
    _draws()
    restore_numpy_state(saved)
    after = np.random.get_state()
    assert public[3] == 1 and after[3:] == public[3:] and after[2] == public[2]
    assert np.array_equal(after[1], public[1])
    assert _draws() == expected


def test_seed_matches_public_set_state(path):
    np.random.seed(5)
    np.random.normal()  # a cached Gaussian must not survive the reseed
    seed_numpy(MATERIAL)
    state = np.random.get_state()
    ours = _draws()
    np.random.set_state(('MT19937', np.frombuffer(MATERIAL, dtype='<u4'), 624, 0, 0.0))
    assert ours == _draws()
    assert state[0] == 'MT19937' and state[2:] == (624, 0, 0.0)
    assert state[1].tobytes() == MATERIAL


def test_direct_and_public_paths_give_the_same_stream(monkeypatch):
    seed_numpy(MATERIAL)
    direct = _draws()
    monkeypatch.setattr(numpy_state, '_FAST', None)
    seed_numpy(MATERIAL)
    assert _draws() == direct


def test_wrong_material_length_is_an_error():
    with pytest.raises(ValueError, match=r'seed_numpy: expected 2496 bytes of key '
                                         r'material, got 16\.'):
        seed_numpy(b'\0' * 16)
