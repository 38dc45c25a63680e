"""Generators a transform owns: keyed in place, saved and restored, named by type."""
import random

import numpy as np
import pytest
import torch

from mmrepro.rng.owned import (
    can_seed,
    generator_kind,
    generator_state,
    is_generator,
    is_global,
    seed_generator,
    set_generator_state,
)

MATERIAL = bytes(range(32))
OTHER = bytes(range(1, 33))


def _makers():
    return {
        'random.Random': random.Random,
        'numpy.random.Generator': np.random.default_rng,
        'numpy.random.Generator(MT19937)': lambda: np.random.Generator(np.random.MT19937()),
        'numpy.random.RandomState': np.random.RandomState,
        'torch.Generator': torch.Generator,
    }


def _draw(gen):
    if isinstance(gen, random.Random):
        return [gen.random() for _ in range(3)]
    if isinstance(gen, np.random.Generator):
        return gen.random(3).tolist()
    if isinstance(gen, np.random.RandomState):
        return gen.random_sample(3).tolist()
    return torch.rand(3, generator=gen).tolist()


@pytest.mark.parametrize('name', list(_makers()))
def test_seeding_in_place_gives_every_holder_the_keyed_stream(name):
    make = _makers()[name]
    a, b = make(), make()
    holder = [a]  # another object sharing the generator sees the new stream
    seed_generator(a, OTHER)
    seed_generator(b, MATERIAL)
    assert _draw(holder[0]) != _draw(b)
    seed_generator(a, MATERIAL)
    seed_generator(b, MATERIAL)
    assert _draw(holder[0]) == _draw(b)


@pytest.mark.parametrize('name', list(_makers()))
def test_state_round_trip(name):
    gen = _makers()[name]()
    seed_generator(gen, MATERIAL)
    state = generator_state(gen)
    expected = _draw(gen)
    _draw(gen)
    set_generator_state(gen, state)
    assert _draw(gen) == expected


def test_kinds_are_named_as_users_write_them():
    assert [generator_kind(make()) for make in _makers().values()] == [
        'random.Random', 'numpy.random.Generator', 'numpy.random.Generator',
        'numpy.random.RandomState', 'torch.Generator']


def test_the_global_generators_are_told_apart():
    assert is_global(random._inst) and is_global(np.random.mtrand._rand)
    assert is_global(torch.default_generator)
    assert not is_global(random.Random()) and not is_global(np.random.default_rng())
    assert is_generator(random.SystemRandom()) and not can_seed(random.SystemRandom())
    assert not is_generator(np.random) and not is_generator(random)
    with pytest.raises(TypeError, match=r"cannot seed a SystemRandom"):
        seed_generator(random.SystemRandom(), MATERIAL)
