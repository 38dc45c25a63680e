"""Make every DataLoader a Runner builds reproducible."""
from __future__ import annotations

import functools
from typing import Any, Optional

from mmengine.runner import Runner
from torch.utils.data import DataLoader

from ..data.global_stream import accumulative_counts, build_global_batch_sampler
from ..data.reproducible_loader import make_reproducible
from ..data.seeded_batch_sampler import SeededBatchSampler
from ..seeding import get_rank, get_world_size
from .runner_randomness import RESUME_ATTR, SETTINGS_ATTR

_original_build_dataloader = Runner.__dict__['build_dataloader'].__func__


def build_dataloader(runner: Optional[Runner], dataloader: Any, seed: Optional[int] = None,
                     diff_rank_seed: bool = False) -> DataLoader:
    """``Runner.build_dataloader`` that knows its Runner's randomness settings.

    The Runner's own calls (``seed=runner.seed``) give the sampler the run's seed
    (with ``diff_rank_seed`` too: the samplers' shared order needs the same seed on
    every rank; MMEngine would draw a fresh one); an explicit other ``seed`` wins.
    The loader is rebuilt by :func:`make_reproducible`. The train loader of a resumed
    run is positioned after the batches the checkpoint consumed. Called on the class
    (no Runner), or on a Runner that does not enable mmrepro, it is MMEngine's method
    unchanged.
    """
    settings = getattr(runner, SETTINGS_ATTR, None)
    if settings is None or isinstance(dataloader, DataLoader):
        return _original_build_dataloader(dataloader, seed=seed, diff_rank_seed=diff_rank_seed)
    base_seed = settings['seed'] if seed is None or seed == runner.seed else seed
    loader = _original_build_dataloader(dataloader, seed=base_seed, diff_rank_seed=False)
    world_size = get_world_size()
    micro = global_batches = None
    if (settings['global_stream'] and settings['sample_seeding']
            and dataloader is runner._train_dataloader and loader.batch_sampler is not None):
        micro = accumulative_counts(runner.optim_wrapper)
        global_batches = build_global_batch_sampler(
            dataloader, loader.dataset, base_seed,
            loader.batch_sampler.batch_size * world_size * micro)
    loader = make_reproducible(loader, base_seed, get_rank(), world_size,
                               diff_rank_seed=settings['diff_rank_seed'],
                               sample_seeding=settings['sample_seeding'],
                               keyed_cache=settings['keyed_cache'],
                               logger=runner.__dict__.get('logger', 'current'),
                               global_batches=global_batches, micro=micro or 1)
    resume = getattr(runner, RESUME_ATTR, None)
    position = ((resume or {}).get('state') or {}).get('position')
    if (position and dataloader is runner._train_dataloader
            and isinstance(loader.batch_sampler, SeededBatchSampler)):
        loader.batch_sampler.resume_at(position['epoch'], position['batches'])
    return loader


class _RunnerAwareStaticMethod:
    """A staticmethod that also receives the Runner when called on an instance."""

    def __init__(self, func: Any) -> None:
        self.func = func

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return functools.partial(self.func, instance)


def apply() -> None:
    """Install :func:`build_dataloader` on MMEngine's Runner."""
    Runner.build_dataloader = _RunnerAwareStaticMethod(build_dataloader)
