"""CheckReproStopHook: end a training process after a few iterations (mmrepro-check)."""
from __future__ import annotations

from typing import Any

from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class CheckReproStopHook(Hook):
    """End the training process after ``max_iters`` iterations (for mmrepro-check).

    It runs last after each iteration (priority LOWEST, so checkpoints and the trace
    are written first), lets the hooks finish the run (``after_run``: the trace file
    is closed, the logs flushed) and exits the process with status 0. The training
    loop itself is untouched, so the check runs the config's own loop, sampler and
    schedule, only shorter.

    Args:
        max_iters: Iterations to train (global count, resumed ones included).
    """

    priority = 'LOWEST'

    def __init__(self, max_iters: int) -> None:
        self.max_iters = max_iters

    def after_train_iter(self, runner: Any, batch_idx: int, data_batch: Any = None,
                         outputs: Any = None) -> None:
        """Stop once ``max_iters`` iterations are done."""
        if runner.iter + 1 >= self.max_iters:
            runner.logger.info(f'mmrepro-check: stopping after {runner.iter + 1} iterations')
            runner.call_hook('after_run')
            raise SystemExit(0)
