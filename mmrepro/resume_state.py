"""The ``mmrepro`` section of a checkpoint: what exact resume needs, and its checks."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch

from .checkpoint_io import CheckpointLoadError

#: Version of the section's layout; bumped when it changes incompatibly.
FORMAT = 1
#: What a checkpoint without the section cannot restore (for the warning).
NOT_RESTORED = ('python/numpy/torch/CUDA RNG states of every rank',
                'the data position inside an epoch (the epoch restarts at batch 0)')


def build_section(seed: int, settings: Dict[str, Any], world_size: int,
                  batch_size: Optional[int], loop: str, position: Optional[Dict[str, int]],
                  rng: List[Dict[str, Any]],
                  preprocessor: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Assemble the section written into ``checkpoint['mmrepro']``.

    Args:
        seed: The run's seed (before any rank offset).
        settings: The validated ``randomness`` settings.
        world_size: Number of ranks that trained.
        batch_size: Per-rank batch size of the train loader.
        loop: ``'epoch'`` or ``'iter'``.
        position: ``dict(epoch=e, batches=b)``: the next pass of sampler epoch
            ``e`` starts after ``b`` batches; None if unknown.
        rng: One :func:`~mmrepro.data.rng_state.capture_rng_state` per rank.
        preprocessor: The data preprocessor's state between iterations
            (:func:`mmrepro.preprocessor_state.capture`).
    """
    return dict(format=FORMAT, seed=seed,
                randomness={k: v for k, v in settings.items() if k != 'seed'},
                world_size=world_size, batch_size=batch_size, loop=loop,
                position=position, rng=rng, preprocessor=preprocessor or {})


def layout_changes(section: Dict[str, Any], world_size: int,
                   batch_size: Optional[int]) -> List[str]:
    """How this run's layout differs from the one that wrote ``section`` (empty if not).

    A position and RNG states saved by one layout cannot be restored on another; the
    loader and the hook ask this one question before either acts on the section.
    """
    changes = []
    if section['world_size'] != world_size:
        changes.append(f"world size {section['world_size']} -> {world_size}")
    if section.get('batch_size') not in (None, batch_size):
        changes.append(f"per-rank batch size {section['batch_size']} -> {batch_size}")
    return changes


def check_section(section: Any, path: str = 'checkpoint') -> Dict[str, Any]:
    """Validate a section read from a checkpoint; raise a clear error if malformed.

    Raises:
        CheckpointLoadError: the section is not what mmrepro writes.
    """
    def fail(what: str) -> None:
        raise CheckpointLoadError(
            f"The 'mmrepro' section of {path} is malformed ({what}); the checkpoint "
            'was modified or written by an incompatible version. Resume from another '
            'checkpoint; nothing was written.')

    if not isinstance(section, dict):
        fail(f'expected a dict, got {type(section).__name__}')
    if section.get('format') != FORMAT:
        fail(f"format {section.get('format')!r}, this mmrepro reads format {FORMAT}")
    for key, kind in (('seed', int), ('world_size', int), ('rng', list)):
        if not isinstance(section.get(key), kind):
            fail(f'{key!r} should be {kind.__name__}, got {section.get(key)!r:.60}')
    if len(section['rng']) != section['world_size']:
        fail(f"{len(section['rng'])} RNG states for world_size {section['world_size']}")
    for state in section['rng']:
        if not (isinstance(state, dict) and isinstance(state.get('torch'), torch.Tensor)
                and isinstance(state.get('python'), (tuple, list))
                and isinstance(state.get('numpy'), dict)):
            fail('an RNG state lacks its python/numpy/torch entries')
    position = section.get('position')
    if position is not None and not (
            isinstance(position, dict)
            and all(isinstance(position.get(k), int) and position[k] >= 0
                    for k in ('epoch', 'batches'))):
        fail(f'position {position!r:.80}')
    if not isinstance(section.get('preprocessor', {}), dict):
        fail(f"preprocessor state {section['preprocessor']!r:.80}")
    return section
