"""mmrepro's Runner, loops and hooks, registered in MMEngine's ``RUNNERS``, ``LOOPS`` and
``HOOKS``: :class:`ReproRunnerMixin`'s body (:mod:`.repro_runner`) lists every change, and
each concern's module holds what it calls."""
from .checkpoints import ReproCheckpointHook
from .epoch_loop import ReproEpochBasedTrainLoop
from .evaluation import ReproTestLoop, ReproValLoop
from .repro_runner import ReproRunner, ReproRunnerMixin
from .schedules import ReproParamSchedulerHook

__all__ = ['ReproCheckpointHook', 'ReproEpochBasedTrainLoop', 'ReproParamSchedulerHook',
           'ReproRunner', 'ReproRunnerMixin', 'ReproTestLoop', 'ReproValLoop']
