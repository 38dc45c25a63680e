"""mmrepro.rng.keys: seed derivation, no collisions over seeds x epochs x samples x ranks."""
import itertools

import numpy as np

from mmrepro.rng.keys import derive_seed, derive_words, sample_key


def test_no_collisions_over_grid():
    grid = itertools.product(range(4), range(3), range(64), range(3))  # seed, epoch, idx, rank
    seeds = [derive_seed(*sample_key(s, e, i * 3 + r, i, r)) for s, e, i, r in grid]
    assert len(set(seeds)) == len(seeds) == 4 * 3 * 64 * 3


def test_neighbouring_seeds_do_not_alias():
    # The additive formula seed + worker collides: (42, 1) == (43, 0).
    assert derive_seed(42, 1) != derive_seed(43, 0)
    assert derive_seed(1, 0, 0) != derive_seed(0, 1, 0) != derive_seed(0, 0, 1)


def test_derivation_is_stable():
    assert derive_words(1, 2, 3).tolist() == derive_words(1, 2, 3).tolist()
    assert derive_words(1, 2, 3).dtype == np.uint32
