"""``ReproRunner``: MMEngine's Runner with every change mmrepro makes to it, as overrides.

Each concern is a mixin of its own module; :class:`ReproRunnerMixin` puts them together
and :class:`ReproRunner` (registered in ``RUNNERS``) puts that in front of MMEngine's
``Runner``:

- ``set_randomness`` -- seeding through mmrepro (:mod:`.randomness`);
- ``build_dataloader`` -- reproducible loaders, resumed at their position (:mod:`.loaders`);
- ``build_model`` -- the mmcv op audit and replacements (:mod:`.model`);
- ``setup_env``, ``wrap_model`` -- torchrun's store per attempt, explicit DDP settings
  (:mod:`.distributed`);
- ``build_param_scheduler``, ``scale_lr`` -- optimizer steps and the global batch under
  accumulation (:mod:`.schedules`);
- ``save_checkpoint``, ``load_checkpoint``, ``resume`` -- atomic saves, allow-listed
  loads (:mod:`.checkpoints`);
- ``register_hooks``, ``register_default_hooks`` -- ``ReproducibilityHook`` where missing,
  mmrepro's checkpoint and scheduler hooks (:mod:`.hooks`);
- ``build_train_loop`` -- the epoch loop that numbers a resumed epoch's batches
  (:mod:`.epoch_loop`);
- ``build_val_loop``, ``build_test_loop`` -- evaluation batches and results that do not
  depend on the number of ranks (:mod:`.eval_loops`);
- ``val``, ``test`` -- a run that only evaluates is recorded as one (:mod:`.evaluating`).

A config gets it with ``runner_type='ReproRunner'`` (the shipped base config sets it),
or through the one entry of :mod:`.entry` when it enables mmrepro with the two
documented lines alone. A Runner of one's own gets it as a mixin:
``class MyRunner(ReproRunnerMixin, Runner)``.
"""
from __future__ import annotations

import logging
from typing import Any

from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from ..run.state import run_state
from .checkpoints import CheckpointMixin
from .distributed import DistributedMixin
from .epoch_loop import LoopMixin
from .eval_loops import EvalLoopMixin
from .evaluating import EvaluatingMixin
from .hooks import HooksMixin
from .loaders import LoaderMixin
from .model import ModelMixin
from .randomness import RandomnessMixin
from .requested import record_init_args
from .schedules import ScheduleMixin


class ReproRunnerMixin(RandomnessMixin, LoaderMixin, ModelMixin, DistributedMixin,
                       ScheduleMixin, CheckpointMixin, HooksMixin, LoopMixin, EvalLoopMixin,
                       EvaluatingMixin):
    """mmrepro's Runner methods, to put in front of a Runner class (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """MMEngine's ``Runner.__init__``, after recording what mmrepro reads besides the
        config (:func:`~mmrepro.runner.requested.record_init_args`)."""
        record_init_args(self, args, kwargs)
        run_state(self).note(logging.INFO, f'mmrepro: the Runner is {type(self).__name__}')
        super().__init__(*args, **kwargs)


@RUNNERS.register_module()
class ReproRunner(ReproRunnerMixin, Runner):
    """MMEngine's ``Runner`` with mmrepro's methods (see :mod:`mmrepro.runner`)."""
