"""The ``mmrepro`` section of a checkpoint: what exact resume needs, and its checks.

The section (format 2) composes parts that save and restore themselves, each with
``state_dict()`` / ``load_state_dict()``:

- ``position``: the train batch sampler's
  (:meth:`~mmrepro.data.seeded_batch_sampler.SeededBatchSampler.state_dict`), in global
  batches where the global stream is on, in the rank's own batches where it is off;
- ``rng``: one :class:`~mmrepro.data.rng_state.ProcessRNGs` state per rank;
- ``preprocessor``: the :class:`~mmrepro.preprocessor_state.PreprocessorState`.

Beside them it names the layout that wrote it (``world_size``, per-rank ``batch_size``),
the seed, the randomness settings and the loop kind. Format 1, written by earlier
releases, held the position as ``dict(epoch, batches)`` in the rank's own batches;
:func:`check_section` reads it as format 2 with that position in ``unit='rank'``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from .checkpoint_io import CheckpointLoadError
from .data.rng_state import check_rng_state
from .data.seeded_batch_sampler import check_position, rank_position

#: Version of the section's layout; bumped when it changes incompatibly.
FORMAT = 2
#: Earlier formats :func:`check_section` still reads (converted to :data:`FORMAT`).
READS = (1, FORMAT)
#: What a checkpoint without the section cannot restore (for the warning).
NOT_RESTORED = ('python/numpy/torch/CUDA RNG states of every rank',
                'the data position inside an epoch (the epoch restarts at batch 0)')


def build_section(seed: int, settings: Dict[str, Any], world_size: int,
                  batch_size: Optional[int], loop: str, position: Optional[Dict[str, Any]],
                  rng: List[Dict[str, Any]],
                  preprocessor: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Assemble the section written into ``checkpoint['mmrepro']``.

    Args:
        seed: The run's seed (before any rank offset).
        settings: The validated ``randomness`` settings.
        world_size: Number of ranks that trained.
        batch_size: Per-rank batch size of the train loader.
        loop: ``'epoch'`` or ``'iter'``.
        position: The batch sampler's state (where the next pass starts); None if
            unknown.
        rng: One :class:`~mmrepro.data.rng_state.ProcessRNGs` state per rank.
        preprocessor: The :class:`~mmrepro.preprocessor_state.PreprocessorState`.
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

    Returns:
        dict: The section in format :data:`FORMAT` (a format-1 section converted; the
        checkpoint's own dict is left as it is).

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
    if section.get('format') not in READS:
        fail(f"format {section.get('format')!r}, this mmrepro reads format "
             f"{' or '.join(map(str, READS))}")
    for key, kind in (('seed', int), ('world_size', int), ('rng', list)):
        if not isinstance(section.get(key), kind):
            fail(f'{key!r} should be {kind.__name__}, got {section.get(key)!r:.60}')
    if len(section['rng']) != section['world_size']:
        fail(f"{len(section['rng'])} RNG states for world_size {section['world_size']}")
    for state in section['rng']:
        problem = check_rng_state(state)
        if problem:
            fail(problem)
    if section['format'] == 1:
        section = from_format_1(section, fail)
    position = section.get('position')
    if position is not None:
        problem = check_position(position)
        if problem:
            fail(problem)
    if not isinstance(section.get('preprocessor', {}), dict):
        fail(f"preprocessor state {section['preprocessor']!r:.80}")
    return section


def from_format_1(section: Dict[str, Any], fail: Any = None) -> Dict[str, Any]:
    """A format-1 section as format 2: its position, in the rank's own batches, says so.

    The layout is that of the run that wrote it (the section names it, and resuming on
    another one is refused or restores nothing), so the position needs no conversion.

    Args:
        section: A format-1 section.
        fail: Called with what is wrong with a malformed position. Defaults to raising
            :class:`~mmrepro.checkpoint_io.CheckpointLoadError`.
    """
    position = section.get('position')
    if position is not None:
        if not (isinstance(position, dict) and all(
                isinstance(position.get(k), int) and position[k] >= 0
                for k in ('epoch', 'batches'))):
            what = f'position {position!r:.80}'
            if fail is None:
                raise CheckpointLoadError(f"The 'mmrepro' section is malformed ({what}).")
            fail(what)
        position = rank_position(position['epoch'], position['batches'])
    return {**section, 'format': FORMAT, 'position': position}
