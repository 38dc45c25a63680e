"""mmrepro.rng.host_state: a process's python, numpy and torch RNG states."""
import random

import numpy as np
import pytest
import torch

from mmrepro.rng.host_state import ProcessRNGs


def _draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_rng_states_round_trip():
    rngs = ProcessRNGs()
    state = rngs.state_dict()
    first = _draws()
    rngs.load_state_dict(state)
    assert _draws() == first
    with pytest.raises(ValueError, match='lacks its python/numpy/torch entries'):
        rngs.load_state_dict(dict(state, torch=None))
