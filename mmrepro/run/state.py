"""One owner for what mmrepro knows about a run: :class:`RunState`, one per Runner.

Every method of :class:`~mmrepro.runner.ReproRunner` and every hook reads and writes
the Runner's :class:`RunState` (:func:`run_state`), never an attribute of its own on the
Runner, and the run record reads what it records from there. A plain MMEngine Runner
never gets one. Its fields are filled in the order a Runner sets up:

1. ``init_args``: ``__init__``'s ``custom_hooks``, ``resume`` and ``load_from``
   (:mod:`mmrepro.runner.requested`);
2. ``settings`` (validated ``randomness``, seed materialised) and ``resume`` (the
   checkpoint to resume, verified against its digests and its section validated once)
   in ``set_randomness``
   (:mod:`mmrepro.runner.randomness`); a checkpoint not peeked at then (a remote file)
   is validated when it is loaded (:class:`mmrepro.resume.keeper.ResumeKeeper`), and
   ``resume.plan`` is decided once the layout is known
   (:func:`mmrepro.resume.section.planned`);
3. ``audit`` when the model is built, ``ddp`` when it is wrapped;
4. ``layout``, ``global_stream`` and ``pipeline_generators`` when the train loader is
   built (:mod:`mmrepro.runner.loaders`): computed there once, read by the step clock,
   the trace, the step draws, the resume plan and the run record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .layout import Layout
from .settings import RunSettings

#: The one Runner attribute mmrepro sets (in the instance's ``__dict__``).
STATE_ATTR = '_mmrepro'


@dataclass
class ResumeSource:
    """The checkpoint a Runner resumes, read before anything is built.

    Attributes:
        path: The checkpoint file.
        seed: Its ``meta['seed']`` (None if it has none).
        section: Its ``mmrepro`` section, validated and in the current format
            (:func:`mmrepro.resume.section.check_section`); None if it has none.
        plan: How this run resumes it (:class:`mmrepro.resume.section.ResumePlan`),
            decided once the train loader's layout is known.
    """

    path: str
    seed: Optional[int] = None
    section: Optional[Dict[str, Any]] = None
    plan: Any = None


@dataclass
class RunState:
    """What mmrepro knows about one Runner (see the module docstring).

    Attributes:
        init_args: ``Runner.__init__`` arguments mmrepro reads besides the config.
        settings: The validated ``randomness`` settings; None where mmrepro does not act.
        messages: ``(level, text)`` lines for the Runner's logger, kept until it exists.
        resume: The checkpoint being resumed, if any.
        layout: The train loader's layout (global batch, accumulation, this rank's
            place); None before the train loader is built.
        global_stream: Whether the train loader draws from the global stream.
        pipeline_generators: The generators the train pipeline owns
            (:class:`mmrepro.data.pipeline_rngs.OwnedGenerator` entries as dicts).
        audit: The op audit of the model (deterministic mode only).
        ddp: The settings ``DistributedDataParallel`` was built with.
        step_clock: Micro-batches per optimizer step while schedulers count steps (1:
            MMEngine's clock).
        entry: How the Runner runs: ``train``, or ``val``/``test`` for a run that only
            evaluates (``Runner.val()``/``test()``; its record says so).
        verification: How the checkpoint it resumes or loads compared with its digests
            (:class:`mmrepro.resume.verification.Verdict`); None before one is loaded.
    """

    init_args: Dict[str, Any] = field(default_factory=dict)
    settings: Optional[RunSettings] = None
    messages: List[Tuple[int, str]] = field(default_factory=list)
    resume: Optional[ResumeSource] = None
    layout: Optional[Layout] = None
    global_stream: bool = False
    pipeline_generators: List[Dict[str, Any]] = field(default_factory=list)
    audit: List[Dict[str, Any]] = field(default_factory=list)
    ddp: Dict[str, Any] = field(default_factory=dict)
    step_clock: int = 1
    entry: str = 'train'
    verification: Any = None

    @property
    def enabled(self) -> bool:
        """Whether mmrepro acts for this Runner."""
        return self.settings is not None

    @property
    def keyed_accumulation(self) -> int:
        """Micro-batches per optimizer step where the global stream keys them, else 0.

        Step draws and the trace key each micro-batch by its optimizer step and slice of
        the global batch only where the batches themselves follow the global stream.
        """
        return self.layout.accumulation if self.global_stream and self.layout is not None else 0

    def note(self, level: int, text: str) -> None:
        """Keep a line for the Runner's logger (see :func:`log_pending`)."""
        self.messages.append((level, text))


def run_state(runner: Any) -> RunState:
    """The Runner's :class:`RunState`, created on first use."""
    state = runner.__dict__.get(STATE_ATTR)
    if state is None:
        state = runner.__dict__[STATE_ATTR] = RunState()
    return state


def find_state(runner: Any) -> Optional[RunState]:
    """The Runner's :class:`RunState` if it has one (None for None or a plain object)."""
    return getattr(runner, '__dict__', {}).get(STATE_ATTR)


def enabled(runner: Any) -> bool:
    """Whether mmrepro acts for ``runner`` (its ``set_randomness`` found it enabled)."""
    state = find_state(runner)
    return state is not None and state.enabled


def settings_of(runner: Any) -> Optional[RunSettings]:
    """The Runner's validated ``randomness`` settings, or None where mmrepro does not act."""
    state = find_state(runner)
    return state.settings if state is not None else None


def log_pending(runner: Any) -> None:
    """Log the lines kept for ``runner``'s own logger, once it exists.

    Another Runner's logger (``MMLogger.get_current_instance()``) may belong to a
    finished run whose log file is gone, so nothing is logged before this one's.
    """
    logger = runner.__dict__.get('logger')
    state = find_state(runner)
    if logger is None or state is None:
        return
    messages, state.messages = state.messages, []
    for level, text in messages:
        logger.log(level, text)


__all__ = ['STATE_ATTR', 'ResumeSource', 'RunState', 'run_state', 'find_state', 'enabled',
           'settings_of', 'log_pending']
