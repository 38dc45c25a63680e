"""mmrepro's Runner, loops and hooks, registered in MMEngine's ``RUNNERS``, ``LOOPS`` and
``HOOKS`` (see :mod:`.repro_runner`)."""
from .checkpoints import ReproCheckpointHook
from .epoch_loop import ReproEpochBasedTrainLoop
from .eval_loops import ReproTestLoop, ReproValLoop
from .repro_runner import ReproRunner, ReproRunnerMixin
from .schedules import ReproParamSchedulerHook

__all__ = ['ReproCheckpointHook', 'ReproEpochBasedTrainLoop', 'ReproParamSchedulerHook',
           'ReproRunner', 'ReproRunnerMixin', 'ReproTestLoop', 'ReproValLoop']
