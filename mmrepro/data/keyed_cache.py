"""Exact ``CachedMosaic``/``CachedMixUp``: partners drawn by key from the sample stream.

MMDetection's cached transforms mix each sample with partners drawn from a cache of
the samples the same worker process handled before. What is in the cache follows
which worker loaded what, and is lost on resume, so results change with
``num_workers`` and after resuming.

Keyed, the cache of the transform ``T`` for the sample at stream position ``p`` holds
the samples at this rank's previous ``max_cached_images - 1`` positions and ``p``
itself, each as it was when it reached ``T``: a partner at position ``q`` is the
sample's own pipeline up to ``T``, run with ``q``'s key (so its random draws, earlier
keyed transforms included, are the ones it had). That is what one process reading the
stream in order would have cached (FIFO), a pure function of the run's keys: the same
with any ``num_workers`` and after any resume. MMDetection's own code then draws
partners from it and mixes as usual.

A partner that the same process computed recently (it was a sample there, or a
partner) is taken from a memo instead of being recomputed; with ``num_workers=0``
nearly every partner is. The first samples of an epoch see a shorter cache, as a
freshly started worker does.

Three mechanisms do this without changing MMDetection's transforms, and none can be made
plainer without losing exactness or the memo's speed:

- **A list look-alike.** ``CachedMosaic``/``CachedMixUp`` keep their cache in the
  attribute ``results_cache`` and use it as a list (``append``, ``len``, indexing,
  ``pop``); they take no cache object and offer no hook, so :class:`KeyedCache` answers
  those four operations, and is that plain list outside a keyed fetch.
- **A frame stack** (``_FRAMES``, one per process: loader workers are processes). The
  transform is called by the dataset's pipeline with the sample's results only, not its
  key; the fetch that seeded the sample (:func:`fetching`) pushes the key, and a partner
  computed meanwhile pushes its own. A worker fetches one sample at a time, so the
  innermost frame is always the sample being transformed.
- **An exception that stops a pipeline partway** (``_Reached``). A partner is the
  sample's own pipeline run up to this transform with the partner's key. MMEngine's
  ``Compose`` runs every transform and has no way to stop early, so the cache raises
  when the partner reaches it, carrying the results; running the whole pipeline
  instead would cost every later transform and could draw from the partner's key past
  the point the original sample did.
"""
from __future__ import annotations

import contextlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterator, List, Optional, Tuple

from ..rng.keys import key_position, with_position
from .seeded_index import SeededIndex
from .wrappers import wrapped_datasets

#: Class names of the transforms whose caches become keyed.
KEYED_TRANSFORMS = ('CachedMosaic', 'CachedMixUp')


@dataclass
class _Frame:
    """A sample being fetched: the dataset read, its index, its generators
    (:class:`~mmrepro.data.pipeline_rngs.PipelineRNGs`), and where to stop."""

    dataset: Any
    index: SeededIndex
    rngs: Any
    stop_at: Optional[Any] = None  # the KeyedCache whose partner this sample is
    reached: set = field(default_factory=set)  # ids of the KeyedCaches it reached


#: The samples being fetched in this process, innermost last.
_FRAMES: List[_Frame] = []


class _Reached(Exception):
    """Raised at the transform a partner was computed for, carrying its results."""

    def __init__(self, results: dict) -> None:
        super().__init__()
        self.results = results


@contextlib.contextmanager
def fetching(dataset: Any, index: SeededIndex, rngs: Any) -> Iterator[None]:
    """Context: ``index`` of ``dataset`` is being fetched (by the loader's fetch), its
    generators ``rngs`` seeded from its key."""
    _FRAMES.append(_Frame(dataset, index, rngs))
    try:
        yield
    finally:
        _FRAMES.pop()


class KeyedCache:
    """The ``results_cache`` of one cached transform, keyed by stream position.

    MMDetection's transform appends the sample's results, reads ``len`` and takes
    items by position, as from its list. Outside a keyed fetch (an index without a
    key) it is that plain list, with MMDetection's behaviour.

    Args:
        transform: The ``CachedMosaic`` or ``CachedMixUp`` it belongs to.
    """

    def __init__(self, transform: Any) -> None:
        self.size = transform.max_cached_images
        self.plain: list = []
        self.entries: List[Tuple[int, int]] = []  # (position, index), the sample's last
        self.frame: Optional[_Frame] = None
        self.current: Optional[dict] = None  # the sample's own results
        self.memo: OrderedDict = OrderedDict()  # sample key -> results at the transform
        #: Most results the memo keeps (0: recompute every partner).
        self.memo_size = 2 * self.size
        #: Partners taken from the memo and partners recomputed, in this process.
        self.reused = self.recomputed = 0

    def __getstate__(self) -> dict:  # workers start with an empty memo
        return dict(self.__dict__, memo=OrderedDict(), frame=None, current=None, plain=[])

    def append(self, results: dict) -> None:
        """Take the sample's results (MMDetection's deep copy); stop if a partner."""
        frame = _FRAMES[-1] if _FRAMES else None
        if frame is None:
            self.frame = None
            self.plain.append(results)
            return
        # A sample whose pipeline gave up (None) is fetched again with another
        # index by the dataset; as a partner it is what it was when first here.
        if id(self) not in frame.reached:
            frame.reached.add(id(self))
            self._remember(frame.index.key, results)
        if frame.stop_at is self:
            raise _Reached(results)
        self.frame, self.current = frame, results
        position = key_position(frame.index.key)
        self.entries = [*frame.index.history[-(self.size - 1):], (position, int(frame.index))]

    def pop(self, i: int) -> dict:
        """MMDetection's eviction: only the plain list ever grows past its size."""
        return self.plain.pop(i)

    def __len__(self) -> int:
        return len(self.plain) if self.frame is None else len(self.entries)

    def __getitem__(self, i: int) -> dict:
        if self.frame is None:
            return self.plain[i]
        position, index = self.entries[i]
        if i == len(self.entries) - 1:
            return self.current
        key = with_position(self.frame.index.key, position, index)
        results = self.memo.get(key)
        if results is None:
            results = self._compute(position, index, key)
            self._remember(key, results)
            self.recomputed += 1
        else:
            self.reused += 1
        return results

    def _remember(self, key: Tuple[int, ...], results: dict) -> None:
        self.memo[key] = results
        self.memo.move_to_end(key)
        while len(self.memo) > self.memo_size:
            self.memo.popitem(last=False)

    def _compute(self, position: int, index: int, key: Tuple[int, ...]) -> dict:
        """The sample at ``position`` as it reached this transform, from its key."""
        frame, current = self.frame, self.current
        history = tuple(h for h in frame.index.history if h[0] < position)
        partner = _Frame(frame.dataset, SeededIndex(index, key, history), frame.rngs,
                         stop_at=self)
        saved = frame.rngs.get_states()
        _FRAMES.append(partner)
        try:
            frame.rngs.seed(key)
            frame.dataset[index]
        except _Reached as reached:
            return reached.results
        finally:
            _FRAMES.pop()
            frame.rngs.set_states(saved)
            self.frame, self.current = frame, current
        # Its pipeline never reached this transform (another pipeline in a
        # concatenated dataset): the sample itself stands in.
        return current


def install_keyed_caches(dataset: Any) -> Tuple[List[str], int]:
    """Give every cached transform in ``dataset``'s pipelines a :class:`KeyedCache`.

    Returns:
        tuple: The transforms' class names, and how many earlier samples each index
        must list in its ``history`` (the look-backs added up, for a cached transform
        whose partners pass through another).
    """
    names, history = [], 0
    for transform in pipeline_transforms(dataset):
        if type(transform).__name__ in KEYED_TRANSFORMS and hasattr(transform,
                                                                     'results_cache'):
            if not isinstance(transform.results_cache, KeyedCache):
                transform.results_cache = KeyedCache(transform)
            names.append(type(transform).__name__)
            history += transform.max_cached_images - 1
    return names, history


def pipeline_transforms(dataset: Any) -> list:
    """The transforms of ``dataset``'s pipeline and of the datasets it wraps."""
    return [transform for inner in wrapped_datasets(dataset)
            for transform in getattr(getattr(inner, 'pipeline', None), 'transforms', [])]
