"""The generators a dataset's pipeline owns: found by walking it, keyed per sample.

mmrepro seeds Python's, numpy's and torch's global generators from every sample's key
(:func:`~mmrepro.rng.host_state.seed_host_rngs`). A transform that owns a generator
draws past them: albumentations (1.4.21 on) gives every ``Compose`` and transform its
own ``random.Random`` and ``numpy.random.Generator``, seeded from OS entropy, so its
draws differ on every rerun, with ``num_workers`` and after a resume.

:func:`find_generators` walks the objects of a dataset's pipeline (and of the datasets
it wraps: ``MultiBranch`` pipelines, mixed-image transforms' sub-pipelines, anything a
transform holds) and lists every generator other than the global ones. Those that
albumentations owns are *keyed*: :class:`PipelineRNGs` reseeds them in place from the
sample's key, one stream per generator, so they draw as a function of (seed, epoch,
sample), like every other transform. Any other owned generator is only *named*: its
owner made it for its own reasons (a fixed seed, a shared stream), so mmrepro reports
it instead of changing what it draws.
"""
from __future__ import annotations

import hashlib
import types
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from ..rng.host_state import get_host_states, seed_host_rngs, set_host_states
from ..rng.keys import OWNED, derive_bytes
from ..rng.owned import (
    SEED_BYTES,
    can_seed,
    generator_kind,
    generator_state,
    is_generator,
    is_global,
    seed_generator,
    set_generator_state,
)
from .wrappers import wrapped_datasets

__all__ = ['KEYED_LIBRARIES', 'OwnedGenerator', 'PipelineRNGs', 'find_generators']

#: Top-level packages whose transforms' own generators mmrepro keys.
KEYED_LIBRARIES = ('albumentations',)
#: How deep the walk follows attributes and container items below a transform (a
#: MultiBranch's Albu's OneOf's transform's generator is 10 down).
MAX_DEPTH = 16
#: Most objects one walk visits (a transform holding a large structure stops it there).
MAX_NODES = 20000
_LEAVES = (str, bytes, int, float, complex, bool, type(None), np.ndarray, np.generic,
           torch.Tensor, torch.nn.Module, torch.utils.data.Dataset, type, types.ModuleType,
           types.FunctionType, types.BuiltinFunctionType, types.MethodType)


@dataclass(frozen=True)
class OwnedGenerator:
    """A generator a pipeline owns.

    Attributes:
        path: Where it is, from the transform: ``Albu.aug.transforms[0].py_random``.
        owner: The class and attribute holding it: ``ShiftScaleRotate.py_random``.
        kind: Its type: ``numpy.random.Generator``.
        keyed: Whether mmrepro keys it per sample.
    """

    path: str
    owner: str
    kind: str
    keyed: bool

    def as_dict(self) -> Dict[str, Any]:
        """The entry as the run record keeps it."""
        return asdict(self)


def find_generators(dataset: Any) -> List[Tuple[Any, OwnedGenerator]]:
    """Every generator the pipelines of ``dataset`` (and the datasets it wraps) own.

    Returns:
        list: ``(generator, description)`` in a fixed order (the walk's), each
        generator once; the process's global generators are left out.
    """
    walk = _Walk()
    for inner in wrapped_datasets(dataset):
        pipeline = getattr(inner, 'pipeline', None)
        transforms = getattr(pipeline, 'transforms', None)
        if isinstance(transforms, (list, tuple)):
            for transform in transforms:
                walk.visit(transform, type(transform).__name__, None, '', 0)
        elif pipeline is not None:
            walk.visit(pipeline, 'pipeline', None, '', 0)
    return walk.found


class _Walk:
    """One walk over a pipeline's objects (:func:`find_generators`)."""

    def __init__(self) -> None:
        self.found: List[Tuple[Any, OwnedGenerator]] = []
        self.seen: set = set()

    def visit(self, obj: Any, path: str, holder: Any, attr: str, depth: int) -> None:
        if id(obj) in self.seen or len(self.seen) >= MAX_NODES or depth > MAX_DEPTH:
            return
        if is_generator(obj):
            self.seen.add(id(obj))
            if not is_global(obj):
                self.found.append((obj, _describe(obj, path, holder, attr)))
            return
        if isinstance(obj, _LEAVES) or callable(obj) and not hasattr(obj, '__dict__'):
            return
        self.seen.add(id(obj))
        container = isinstance(obj, (dict, list, tuple))
        for name, value in _children(obj):
            child = (f'{path}[{name!r}]' if isinstance(obj, dict) else f'{path}[{name}]'
                     if container else f'{path}.{name}')
            # A generator in a container is named by the object holding the container.
            self.visit(value, child, holder if container else obj,
                       attr if container else name, depth + 1)


def _children(obj: Any) -> Iterator[Tuple[Any, Any]]:
    """``(name, value)`` of what ``obj`` holds: items, then attributes."""
    if isinstance(obj, dict):
        yield from list(obj.items())
    elif isinstance(obj, (list, tuple)):
        yield from enumerate(obj)
    elif isinstance(obj, (set, frozenset)):
        return
    else:
        yield from list(getattr(obj, '__dict__', {}).items())
        for name in getattr(type(obj), '__slots__', ()):
            if hasattr(obj, name):
                yield name, getattr(obj, name)


def _describe(obj: Any, path: str, holder: Any, attr: str) -> OwnedGenerator:
    library = type(holder).__module__.split('.')[0] if holder is not None else ''
    return OwnedGenerator(path=path, owner=f'{type(holder).__name__}.{attr}',
                          kind=generator_kind(obj),
                          keyed=library in KEYED_LIBRARIES and can_seed(obj))


class PipelineRNGs:
    """What a sample's pipeline draws from: the global generators and the keyed owned ones.

    :meth:`seed` seeds both from a sample's key; :meth:`get_states` and
    :meth:`set_states` save and restore both. The keyed generators are found again
    whenever a dataset's pipeline object changes (``PipelineSwitchHook``), and in
    every process that unpickles it (a DataLoader worker walks its own copy once).

    Args:
        dataset: The dataset whose pipelines are walked.
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._pipelines: Optional[Tuple[int, ...]] = None
        self._keyed: List[Any] = []
        #: What the last walk found.
        self.found: List[OwnedGenerator] = []

    def __getstate__(self) -> Dict[str, Any]:  # object ids are this process's
        return dict(self.__dict__, _pipelines=None, _keyed=[], found=[])

    def refresh(self) -> None:
        """Walk the pipelines again if one of them is another object than last time."""
        pipelines = tuple(id(getattr(d, 'pipeline', None))
                          for d in wrapped_datasets(self.dataset))
        if pipelines != self._pipelines:
            found = find_generators(self.dataset)
            self._keyed = [gen for gen, info in found if info.keyed]
            self.found = [info for _, info in found]
            self._pipelines = pipelines

    def seed(self, key: Tuple[int, ...]) -> None:
        """Seed the global generators and every keyed one from ``key``: the keyed
        generators take consecutive slices of one SHAKE-128 stream of the key's digest
        (tagged :data:`~mmrepro.rng.keys.OWNED`), in the walk's order."""
        seed_host_rngs(key)
        if not self._keyed:
            return
        stream = hashlib.shake_128(derive_bytes(OWNED, *key)).digest(
            SEED_BYTES * len(self._keyed))
        for slot, generator in enumerate(self._keyed):
            seed_generator(generator, stream[slot * SEED_BYTES:(slot + 1) * SEED_BYTES])

    def get_states(self) -> Tuple[Any, List[Any]]:
        """The states of the global generators and of the keyed ones."""
        return get_host_states(), [generator_state(g) for g in self._keyed]

    def set_states(self, states: Tuple[Any, List[Any]]) -> None:
        """Restore what :meth:`get_states` returned."""
        host, owned = states
        set_host_states(host)
        for generator, state in zip(self._keyed, owned, strict=True):
            set_generator_state(generator, state)
