"""The model's draws keyed by (seed, optimizer step, slice of the global batch)."""
import random

import numpy as np
import torch

from mmrepro.rng.keys import MODEL
from mmrepro.rng.step_draws import seed_step, step_key


def _draws(key):
    seed_step(key)
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_rank_j_and_micro_batch_j_share_a_key():
    assert step_key(3, 5, 1, 2) == (MODEL, 3, 2, 3)  # step 5 // 2, slice 1 * 2 + 1
    for step in range(3):
        for j in range(2):
            assert step_key(7, 2 * step + j, 0, 2) == step_key(7, step, j, 1)


def test_every_global_rng_follows_the_key():
    key = step_key(7, 4, 1, 1)
    first = _draws(key)
    random.random(), np.random.rand(), torch.rand(3)  # whatever ran in between
    assert _draws(key) == first
    other = _draws(step_key(7, 4, 0, 1))  # the other slice of the same step
    assert all(a != b for a, b in zip(first, other, strict=True))
