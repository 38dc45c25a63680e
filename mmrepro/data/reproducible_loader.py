"""Turn a DataLoader built by MMEngine into one whose randomness ignores workers."""
from __future__ import annotations

import functools
import inspect
import logging
from typing import Any, List, Mapping, Optional, Union

import torch
from mmengine.logging import print_log
from torch.utils.data import DataLoader

from ..rng.keys import LOADER, derive_seed
from ..rng.owned import DRAW_GLOBAL
from ..rng.worker_init import worker_init_fn
from ..run.layout import Layout
from ..run.settings import RunSettings, parse_randomness
from .global_batch_sampler import GlobalBatchSampler
from .keyed_cache import KEYED_TRANSFORMS, install_keyed_caches, pipeline_transforms
from .pipeline_rngs import KEYED_LIBRARIES, OwnedGenerator
from .rank_batch_sampler import RankBatchSampler
from .sample_fetch import install_sample_seeding, owned_generators

#: DataLoader arguments that are replaced (not copied) when the loader is rebuilt.
_REPLACED = {'self', 'dataset', 'batch_size', 'shuffle', 'sampler', 'batch_sampler',
             'drop_last', 'generator', 'worker_init_fn'}


def make_reproducible(loader: DataLoader, settings: Union[RunSettings, Mapping[str, Any]],
                      layout: Optional[Layout] = None, logger: Any = 'current',
                      global_batches: Any = None) -> DataLoader:
    """Rebuild ``loader`` so its randomness depends on the run's seed only.

    - It gets its own ``torch.Generator`` seeded from the seed: creating an iterator
      (validation included) no longer draws from the global torch RNG.
    - Its workers are seeded by :func:`~mmrepro.rng.worker_init.worker_init_fn`
      (unless the config names its own ``worker_init_fn``).
    - With ``sample_seeding``, every index carries the key ``(seed, epoch,
      position, index)`` and the dataset seeds the RNGs from it before each
      sample's pipeline, so augmentation is the same with any ``num_workers``,
      ``persistent_workers`` or ``prefetch_factor``.
    - With ``global_batches`` too (a batch sampler built for the whole world, see
      :mod:`~mmrepro.data.global_stream`), this rank trains on its slices of the
      global batches: the same batches for any number of ranks and ``accumulative_counts``.
    - With ``keyed_cache`` too, ``CachedMosaic``/``CachedMixUp`` draw their partners
      from the stream by key (:mod:`~mmrepro.data.keyed_cache`): the same with any
      ``num_workers`` and after resume.
    - The generators the pipeline's transforms own are keyed from the same key where
      mmrepro can (albumentations'), and named in the log where it cannot
      (:mod:`~mmrepro.data.pipeline_rngs`); with ``strict`` they are refused.

    A plain loader of one process needs the seed alone:
    ``make_reproducible(loader, dict(seed=0))``.

    Args:
        loader: A DataLoader as built by ``Runner.build_dataloader``.
        settings: The run's ``randomness`` settings, as a
            :class:`~mmrepro.run.settings.RunSettings` or a ``randomness`` dict
            (validated); it reads ``seed`` (the same on every rank, not None),
            ``diff_rank_seed``, ``sample_seeding``, ``keyed_cache`` and ``strict``.
        layout: This process's :class:`~mmrepro.run.layout.Layout` (its rank and the
            number of ranks; with ``global_batches``, the slices it takes). Defaults to
            None: rank 0 of 1.
        logger: Where warnings go (the Runner's own logger; ``print_log``'s
            ``logger``). Defaults to ``'current'``.
        global_batches: The global stream's batch sampler. Defaults to None.

    Returns:
        DataLoader: A new loader over the same dataset, sampler and batch sampler.

    Raises:
        ValueError: The settings have no seed; ``global_batches`` without a layout; or,
            with ``strict``, the pipeline owns a generator mmrepro cannot key.
    """
    if not isinstance(settings, RunSettings):
        settings = parse_randomness(settings)
    seed = settings.seed
    if seed is None:
        raise ValueError('make_reproducible: the settings have no seed (seed=None); give '
                         "the run's seed, the same on every rank, e.g. "
                         'make_reproducible(loader, dict(seed=0)).')
    if global_batches is not None and layout is None:
        raise ValueError('make_reproducible: global_batches needs the layout that takes its '
                         'slices (layout=Layout(batch_size, rank, world_size, '
                         'accumulation)), got layout=None.')
    rank, world_size = (0, 1) if layout is None else (layout.rank, layout.world_size)
    if loader.batch_sampler is None:  # batch_size=None: nothing mmrepro can key
        return loader
    batch_sampler = loader.batch_sampler
    if settings.sample_seeding:
        if install_sample_seeding(loader.dataset):
            report_generators(owned_generators(loader.dataset), settings.strict, logger)
            history = _cached_transforms(loader.dataset, settings.keyed_cache, logger)
            if global_batches is not None:
                batch_sampler = GlobalBatchSampler(batch_sampler, global_batches, layout, seed,
                                                   settings.diff_rank_seed, logger=logger,
                                                   history=history)
            else:
                batch_sampler = RankBatchSampler(batch_sampler, seed, rank, world_size,
                                                 settings.diff_rank_seed, logger=logger,
                                                 history=history)
        else:
            print_log(
                f'mmrepro: {type(loader.dataset).__name__} defines its own batched '
                '`__getitems__`, so per-sample seeding is off for it: augmentation will '
                'depend on num_workers.', logger=logger, level=logging.WARNING)
    kwargs = {name: getattr(loader, name)
              for name in inspect.signature(DataLoader.__init__).parameters
              if name not in _REPLACED and hasattr(loader, name)}
    if loader.num_workers == 0:
        kwargs.pop('prefetch_factor', None)
    init_fn = loader.worker_init_fn
    if init_fn is None or _is_mmengine_default(init_fn):
        init_fn = functools.partial(worker_init_fn, seed=seed, rank=rank)
    generator = torch.Generator()
    generator.manual_seed(derive_seed(LOADER, seed, rank))
    rebuilt = DataLoader(loader.dataset, batch_sampler=batch_sampler, generator=generator,
                         worker_init_fn=init_fn, **kwargs)
    # Keep `loader.sampler`, `batch_size` and `drop_last` what MMEngine built
    # (DistSamplerSeedHook, hooks such as mmpretrain's PreciseBNHook and users read them);
    # a DataLoader given a batch sampler uses none of them for a map-style dataset.
    for name in ('sampler', 'batch_size', 'drop_last'):
        object.__setattr__(rebuilt, name, getattr(loader, name))
    return rebuilt


def _is_mmengine_default(fn: Any) -> bool:
    from mmengine.dataset import worker_init_fn as default
    return isinstance(fn, functools.partial) and fn.func is default


def _cached_transforms(dataset: Any, keyed: bool, logger: Any) -> int:
    """Key the cached transforms (or warn); the history each index must carry."""
    if not keyed:
        names = sorted({type(t).__name__ for t in pipeline_transforms(dataset)}
                       & set(KEYED_TRANSFORMS))
        if names:
            print_log(
                f'mmrepro: {names} keep a cache of earlier samples in each worker process '
                '(randomness.keyed_cache=False): the images they mix in depend on which '
                'worker handled which sample and are lost on resume, so results differ '
                'between num_workers settings and after resuming (reruns with the same '
                'num_workers still match).', logger=logger, level=logging.WARNING)
        return 0
    names, history = install_keyed_caches(dataset)
    if names:
        print_log(
            f'mmrepro: {sorted(set(names))} draw their partners by key from the '
            f'previous samples of the stream ({history} looked back), the same with any '
            'num_workers and after resume (randomness.keyed_cache=False: per-worker '
            'caches).', logger=logger, level=logging.INFO)
    return history


def report_generators(found: List[OwnedGenerator], strict: bool, logger: Any) -> None:
    """Log the generators the pipeline owns: those keyed, then those that are not.

    Raises:
        ValueError: With ``strict``, if any is not keyed.
    """
    keyed = [g for g in found if g.keyed]
    if keyed:
        where = ', '.join(dict.fromkeys(g.path.split('.')[0] for g in keyed))
        print_log(
            f'mmrepro: keys the {len(keyed)} generator(s) that {"/".join(KEYED_LIBRARIES)} '
            f'owns in the pipeline (in {where}) from each sample\'s key: its draws are the '
            'same on a rerun, with any num_workers, after resume and on every layout.',
            logger=logger, level=logging.INFO)
    other = [g for g in found if not g.keyed]
    if not other:
        return
    names = ', '.join(g.owner + f' ({g.kind}' + (f' at {g.path})' if g.path != g.owner else ')')
                      for g in other)
    breaks = ('their draws change on every rerun (unless the transform seeds them), with '
              'num_workers and after a resume')
    fix = f'{DRAW_GLOBAL} instead, which mmrepro seeds for every sample'
    if strict:
        raise ValueError(
            f'randomness.strict=True, but the pipeline owns generator(s) mmrepro does not '
            f'key: {names}; {breaks}. Fix: {fix}, or set randomness.strict=False to train '
            'with a warning.')
    print_log(
        f'mmrepro: the pipeline owns generator(s) mmrepro does not key: {names}; {breaks}. '
        f'Fix: {fix} (randomness.strict=True refuses to train with them).',
        logger=logger, level=logging.WARNING)
