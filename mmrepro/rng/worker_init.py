"""Worker initialisation with collision-free seeds, registered in MMEngine's FUNCTIONS."""
from __future__ import annotations

import torch
from mmengine.registry import FUNCTIONS

from .host_state import seed_host_rngs
from .keys import WORKER


@FUNCTIONS.register_module(name='mmrepro_worker_init_fn')
def worker_init_fn(worker_id: int, seed: int, rank: int = 0) -> None:
    """Seed a DataLoader worker from ``(seed, rank, worker_id, iterator base seed)``.

    PyTorch gives worker ``w`` the initial seed ``base_seed + w``, where
    ``base_seed`` is drawn once per DataLoader iterator from the loader's
    generator (mmrepro gives every loader its own seeded generator). Mixing it in
    gives every epoch of non-persistent workers a new, reproducible stream. The whole
    key (the worker domain tag, ``seed``, ``rank``, ``worker_id`` and the worker's
    ``torch.initial_seed()``) is hashed with BLAKE2b
    (:func:`~mmrepro.rng.host_state.seed_host_rngs`), which keeps neighbouring seeds,
    ranks and workers from colliding.

    Per-sample seeding reseeds before every sample anyway; this covers whatever a
    worker draws outside ``__getitem__``.

    Args:
        worker_id: The worker's id, in ``[0, num_workers)``.
        seed: The run's seed.
        rank: The process's rank.
    """
    seed_host_rngs((WORKER, seed, rank, worker_id, torch.initial_seed() % (2**63)))
