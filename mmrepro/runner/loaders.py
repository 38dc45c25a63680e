"""Every DataLoader the Runner builds is reproducible (``ReproRunner.build_dataloader``), and
a resumed run's train loader starts where the checkpoint stopped."""
from __future__ import annotations

import dataclasses
import logging
from typing import Any, Optional

from mmengine.logging import print_log
from mmengine.runner import Runner
from mmengine.runner.base_loop import BaseLoop
from mmengine.runner.loops import IterBasedTrainLoop
from torch.utils.data import DataLoader

from ..data.global_batch_sampler import GlobalBatchSampler
from ..data.global_stream import build_global_batch_sampler
from ..data.reproducible_loader import make_reproducible
from ..data.sample_fetch import owned_generators
from ..data.seeded_batch_sampler import SeededBatchSampler
from ..resume.section import planned
from ..rng.seeding import get_rank, get_world_size
from ..run.layout import Layout, accumulative_counts, check_global_batch
from ..run.state import run_state


def reproducible_loader(runner: Runner, dataloader: Any, seed: Optional[int]) -> DataLoader:
    """MMEngine's loader for the config ``dataloader``, rebuilt reproducibly.

    The Runner's own calls (``seed=runner.seed``) give the sampler the run's seed (with
    ``diff_rank_seed`` too: the samplers' shared order needs the same seed on every rank;
    MMEngine would draw a fresh one); an explicit other ``seed`` wins. The loader is
    rebuilt by :func:`~mmrepro.data.reproducible_loader.make_reproducible`. The train
    loader's layout is built and checked here, and a resumed run's train loader is
    positioned after the batches the checkpoint consumed (:func:`position_train_loader`).
    """
    state = run_state(runner)
    settings = state.settings
    if seed is not None and seed != runner.seed:
        settings = dataclasses.replace(settings, seed=seed)
    loader = Runner.build_dataloader(dataloader, seed=settings.seed, diff_rank_seed=False)
    logger = runner.__dict__.get('logger', 'current')
    global_batches = None
    batch_size = getattr(loader.batch_sampler, 'batch_size', None)
    # This process's place; its batch size counts only for the train loader's stream.
    layout = Layout(batch_size if isinstance(batch_size, int) else 1, get_rank(),
                    get_world_size())
    train = dataloader is runner._train_dataloader
    if train and isinstance(batch_size, int):
        layout = dataclasses.replace(layout,
                                     accumulation=accumulative_counts(runner.optim_wrapper))
        check_global_batch(settings.global_batch, layout)
        if settings.global_stream and settings.sample_seeding:
            global_batches = _global_batches(dataloader, loader, settings.seed, layout,
                                             logger)
        state.layout = layout
    loader = make_reproducible(loader, settings, layout, logger=logger,
                               global_batches=global_batches)
    if train:
        state.pipeline_generators = [g.as_dict() for g in owned_generators(loader.dataset)]
        state.global_stream = isinstance(loader.batch_sampler, GlobalBatchSampler)
        position_train_loader(runner, loader)
    return loader


def position_train_loader(runner: Runner, loader: DataLoader) -> None:
    """Start the train loader after the batches the resumed checkpoint consumed.

    The one place the position is loaded: when the train loader is built, where the
    checkpoint was peeked at (:mod:`mmrepro.runner.randomness`), and, after
    ``Runner.resume``, for a loader built before the checkpoint was known (a remote file,
    not peeked at; :func:`position_after_resume`). The section was validated when the
    checkpoint was peeked at or loaded; how this run resumes it is decided once, now that
    the layout is known (:func:`~mmrepro.resume.section.planned`), and
    ``ReproducibilityHook`` follows the same plan. The batch sampler validates the
    position and holds it until its next pass. A refused plan positions nothing (the hook
    then refuses, or with ``auto_scale_lr`` continues as MMEngine would, and says so); a
    sampler already positioned there is left as it is.
    """
    state = run_state(runner)
    resume = state.resume
    if resume is None or resume.section is None:
        return
    plan = planned(resume, state.layout, state.global_stream)
    position = resume.section.get('position')
    sampler = loader.batch_sampler
    if position and plan.restores and isinstance(sampler, SeededBatchSampler) and \
            not sampler.positioned_at(sampler.local_position(position)):
        sampler.load_state_dict(position)


def position_after_resume(runner: Runner) -> None:
    """After ``Runner.resume``: position a train loader built before the checkpoint was
    known (:func:`position_train_loader`), unless its loop is an ``IterBasedTrainLoop``,
    whose iterator has started its pass: MMEngine then replays the trained batches (and
    the log says so, :class:`~mmrepro.resume.keeper.ResumeKeeper`)."""
    loop = runner._train_loop
    if isinstance(loop, BaseLoop) and not isinstance(loop, IterBasedTrainLoop):
        position_train_loader(runner, loop.dataloader)


def _global_batches(cfg: Any, loader: DataLoader, seed: int, layout: Layout,
                    logger: Any) -> Any:
    """The global stream's batch sampler (logged), or None (warned) where none can be built."""
    batches = build_global_batch_sampler(cfg, loader.dataset, seed, layout.global_batch)
    if batches is None:
        print_log('mmrepro: the train loader\'s sampler or batch sampler is given as an '
                  'object, not a config dict, so it cannot be rebuilt for the whole world: '
                  'each rank batches its own share, and the batches depend on the number of '
                  'ranks.', logger=logger, level=logging.WARNING)
        return None
    print_log(f'mmrepro: one batch stream for every layout: global batches of '
              f'{layout.global_batch} = {layout.world_size} rank(s) x batch_size '
              f'{layout.batch_size} x accumulative_counts {layout.accumulation}', logger=logger,
              level=logging.INFO)
    return batches
