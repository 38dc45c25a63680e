"""The ``mmrepro`` section of a checkpoint: what exact resume needs, and its checks.

The section (format 2) composes parts that save and restore themselves, each with
``state_dict()`` / ``load_state_dict()``:

- ``position``: the train batch sampler's
  (:meth:`~mmrepro.data.seeded_batch_sampler.SeededBatchSampler.state_dict`), in global
  batches where the global stream is on, in the rank's own batches where it is off;
- ``rng``: one :class:`~mmrepro.rng.host_state.ProcessRNGs` state per rank;
- ``preprocessor``: the :class:`~mmrepro.resume.preprocessor_state.PreprocessorState`.

Beside them it names the layout that wrote it (``world_size``, per-rank ``batch_size``),
the seed, the randomness settings and the loop kind. Format 1, written by earlier
releases, held the position as ``dict(epoch, batches)`` in the rank's own batches;
:func:`check_section` reads it as format 2 with that position in ``unit='rank'``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..data.data_position import position_problem, rank_position
from ..rng.host_state import rng_state_problem
from ..run.layout import Layout, describe, global_batch_fix
from .checkpoint_io import CheckpointLoadError

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
        settings: The validated ``randomness`` settings as a plain dict
            (:meth:`mmrepro.run.settings.RunSettings.to_dict`).
        world_size: Number of ranks that trained.
        batch_size: Per-rank batch size of the train loader.
        loop: ``'epoch'`` or ``'iter'``.
        position: The batch sampler's state (where the next pass starts); None if
            unknown.
        rng: One :class:`~mmrepro.rng.host_state.ProcessRNGs` state per rank.
        preprocessor: The :class:`~mmrepro.resume.preprocessor_state.PreprocessorState`.
    """
    return dict(format=FORMAT, seed=seed,
                randomness={k: v for k, v in settings.items() if k != 'seed'},
                world_size=world_size, batch_size=batch_size, loop=loop,
                position=position, rng=rng, preprocessor=preprocessor or {})


#: The ways a checkpoint resumes (:class:`ResumePlan`).
EXACT, CONTINUE, REFUSE = 'exact', 'continue', 'refuse'


@dataclass(frozen=True)
class ResumePlan:
    """How this run resumes a checkpoint's section; the loader and the hook both follow it.

    Attributes:
        mode: :data:`EXACT` (the layout that wrote it: every part restored),
            :data:`CONTINUE` (another layout with the same global batch: the position is
            restored in global batches and the iteration count converted; the RNG states
            of the old ranks are not needed, since every draw is keyed by the data it
            serves) or :data:`REFUSE` (why is in ``reason``).
        changes: How the layout changed, e.g. ``'world size 2 -> 1'``.
        reason: Why it cannot resume exactly (``REFUSE``), one line.
        accumulation_from: Micro-batches per optimizer step of the run that wrote it.
        accumulation_to: This run's.
    """

    mode: str
    changes: List[str] = field(default_factory=list)
    reason: str = ''
    accumulation_from: int = 1
    accumulation_to: int = 1

    @property
    def restores(self) -> bool:
        """Whether the data position is restored (:data:`EXACT` or :data:`CONTINUE`)."""
        return self.mode != REFUSE

    def iteration(self, iteration: int) -> int:
        """The checkpoint's iteration count (its micro-batches) in this run's micro-batches.

        Optimizer steps are the common unit: ``steps x accumulation_to`` (plus the micro-batches
        into the next step, where both runs take the same number per step).
        """
        steps, partial = divmod(iteration, self.accumulation_from)
        return steps * self.accumulation_to + partial


def layout_of(section: Dict[str, Any]) -> Optional[Layout]:
    """The layout that wrote ``section``, where its position says its global batch."""
    position = section.get('position') or {}
    world, batch, total = section['world_size'], section.get('batch_size'), \
        position.get('global_batch')
    if not isinstance(batch, int) or not isinstance(total, int) or total % (world * batch):
        return None
    return Layout(batch, 0, world, total // (world * batch))


def plan_resume(section: Dict[str, Any], layout: Optional[Layout],
                global_stream: bool) -> ResumePlan:
    """How a run of ``layout`` resumes ``section`` (validated by :func:`check_section`).

    The same layout resumes exactly. Another layout with the same global batch continues
    the data stream exactly where the position counts global batches and this run draws
    from the global stream too. Anything else is refused (``auto_scale_lr`` may still
    continue as MMEngine does, without restoring any part).

    Args:
        section: The checkpoint's section.
        layout: This run's layout (None: unknown, taken as the checkpoint's).
        global_stream: Whether this run's train loader draws from the global stream.
    """
    world, batch = section['world_size'], section.get('batch_size')
    if layout is None:
        return ResumePlan(EXACT)
    old = layout_of(section)
    changes = []
    if world != layout.world_size:
        changes.append(f'world size {world} -> {layout.world_size}')
    if batch not in (None, layout.batch_size):
        changes.append(f'per-rank batch size {batch} -> {layout.batch_size}')
    if old is not None and old.accumulation != layout.accumulation:
        changes.append(f'accumulative_counts {old.accumulation} -> {layout.accumulation}')
    if not changes:
        return ResumePlan(EXACT, accumulation_from=layout.accumulation,
                          accumulation_to=layout.accumulation)
    wrote = describe(old) if old is not None else f'{world} rank(s) x batch_size {batch}'
    head = (f"mmrepro: cannot resume exactly: {', '.join(changes)} between the checkpoint "
            f'({wrote}) and this run ({describe(layout)})')
    if old is None or old.global_batch != layout.global_batch:
        fix = (global_batch_fix(old.global_batch, layout.world_size) if old is not None else
               f'Resume on {world} rank(s) with train_dataloader.batch_size {batch}.')
        return ResumePlan(REFUSE, changes, f'{head}: the global batch differs. {fix}')
    position = section.get('position') or {}
    if not global_stream:
        return ResumePlan(REFUSE, changes, f'{head}: this run does not draw from the global '
                          'stream (randomness.global_stream or sample_seeding is off, or the '
                          'sampler is not a config), so only the layout that wrote it can '
                          'resume it.')
    if position.get('micro_batches') and position['micro'] != layout.accumulation:
        return ResumePlan(REFUSE, changes, f"{head}: the checkpoint is {position['micro_batches']}"
                          f" of {position['micro']} micro-batches into an optimizer step. "
                          'Resume from a checkpoint saved at a step boundary.')
    return ResumePlan(CONTINUE, changes, accumulation_from=old.accumulation,
                      accumulation_to=layout.accumulation)


def planned(source: Any, layout: Optional[Layout], global_stream: bool) -> ResumePlan:
    """The plan of the resumed checkpoint ``source``, decided once the layout is known and
    kept there.

    Args:
        source: The run state's :class:`~mmrepro.run.state.ResumeSource` (its
            section validated).
        layout: This run's layout (None: unknown, taken as the checkpoint's).
        global_stream: Whether this run's train loader draws from the global stream.
    """
    if source.plan is not None:
        return source.plan
    plan = plan_resume(source.section, layout, global_stream)
    if layout is not None:  # known: the plan is final
        source.plan = plan
    return plan


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
        problem = rng_state_problem(state)
        if problem:
            fail(problem)
    if section['format'] == 1:
        section = from_format_1(section, fail)
    position = section.get('position')
    if position is not None:
        problem = position_problem(position)
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
            :class:`~mmrepro.resume.checkpoint_io.CheckpointLoadError`.
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
