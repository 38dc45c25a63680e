"""Generators an object owns: recognise them, key them in place, save and restore them.

A transform that holds its own ``random.Random``, ``numpy.random.Generator`` /
``RandomState`` or ``torch.Generator`` draws from it instead of the process's global
generators, which mmrepro seeds for every sample. :func:`seed_generator` reseeds such
a generator *in place* (every object that shares it sees the new stream) from key
material, and :func:`generator_state` / :func:`set_generator_state` save and restore it
around work that must not disturb it (a keyed cache computing a partner sample).
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ['DRAW_GLOBAL', 'GENERATOR_TYPES', 'SEED_BYTES', 'can_seed', 'generator_kind',
           'generator_state', 'is_generator', 'is_global', 'seed_generator',
           'set_generator_state']

#: The generator types a transform can own.
GENERATOR_TYPES = (random.Random, np.random.RandomState, np.random.Generator,
                   torch.Generator)
_KIND_NAMES = {random.Random: 'random.Random', np.random.RandomState: 'numpy.random.RandomState',
               np.random.Generator: 'numpy.random.Generator', torch.Generator: 'torch.Generator'}
#: What a transform that owns a generator mmrepro does not key should do instead (the
#: fix the loader's warning and the checks' verdicts give).
DRAW_GLOBAL = "draw from np.random, random or torch's default generator"
#: Bytes of key material :func:`seed_generator` takes.
SEED_BYTES = 32


def is_generator(obj: Any) -> bool:
    """Whether ``obj`` is a random generator of a type in :data:`GENERATOR_TYPES`."""
    return isinstance(obj, GENERATOR_TYPES)


def is_global(obj: Any) -> bool:
    """Whether ``obj`` is one of the process's global generators (seeded per sample).

    Python's ``random`` module functions, numpy's ``np.random.*`` and torch's CPU
    default generator are what mmrepro seeds from every sample's key.
    """
    return (obj is getattr(random, '_inst', None) or obj is np.random.mtrand._rand
            or obj is torch.default_generator)


def generator_kind(obj: Any) -> str:
    """The generator's type as users write it, e.g. ``numpy.random.Generator``."""
    kind = type(obj)
    return _KIND_NAMES.get(kind, f'{kind.__module__}.{kind.__qualname__}')


def can_seed(obj: Any) -> bool:
    """Whether :func:`seed_generator` can key ``obj`` (``SystemRandom`` cannot be seeded)."""
    return is_generator(obj) and not isinstance(obj, random.SystemRandom)


def seed_generator(obj: Any, material: bytes) -> None:
    """Reseed the generator ``obj`` in place from ``material`` (:data:`SEED_BYTES` bytes).

    Every object holding ``obj`` draws the new stream: albumentations hands one
    generator to several of its transforms, and they keep sharing it.
    """
    if not can_seed(obj):
        raise TypeError(f'cannot seed a {type(obj).__name__}: expected one of '
                        f'{[t.__name__ for t in GENERATOR_TYPES]} (not SystemRandom)')
    value = int.from_bytes(material, 'little')
    if isinstance(obj, random.Random):
        obj.seed(value)
    elif isinstance(obj, np.random.Generator):
        bits = obj.bit_generator
        if type(bits) is np.random.PCG64:  # default_rng's: set the 256-bit state directly
            bits.state = {'bit_generator': 'PCG64',
                          'state': {'state': value & (2**128 - 1), 'inc': (value >> 128) | 1},
                          'has_uint32': 0, 'uinteger': 0}
        else:
            bits.state = type(bits)(value).state
    elif isinstance(obj, np.random.RandomState):
        obj.seed(np.frombuffer(material, dtype=np.uint32))
    else:
        obj.manual_seed(value & (2**64 - 1))


def generator_state(obj: Any) -> Any:
    """The state of the generator ``obj``, for :func:`set_generator_state`."""
    if isinstance(obj, random.Random):
        return obj.getstate()
    if isinstance(obj, np.random.Generator):
        return obj.bit_generator.state
    if isinstance(obj, np.random.RandomState):
        return obj.get_state(legacy=False)
    return obj.get_state()


def set_generator_state(obj: Any, state: Any) -> None:
    """Restore a state :func:`generator_state` returned."""
    if isinstance(obj, random.Random):
        obj.setstate(state)
    elif isinstance(obj, np.random.Generator):
        obj.bit_generator.state = state
    elif isinstance(obj, np.random.RandomState):
        obj.set_state(state)
    else:
        obj.set_state(state)
