"""Let a resumed epoch number its batches from where the checkpoint stopped."""
from __future__ import annotations

from mmengine.runner.loops import EpochBasedTrainLoop

from ..run.state import find_state


def run_epoch(self: EpochBasedTrainLoop) -> None:
    """``EpochBasedTrainLoop.run_epoch``, starting ``batch_idx`` at the resume offset.

    Identical to MMEngine's when no offset is set. With one, the DataLoader already
    skips the consumed batches (at the index level), and hooks see the same
    ``batch_idx`` as in the run that wrote the checkpoint (logging intervals,
    end-of-epoch checks). The offset is the run state's ``batch_offset``, which
    ``ReproducibilityHook`` sets before a resumed epoch.
    """
    self.runner.call_hook('before_train_epoch')
    self.runner.model.train()
    state = find_state(self.runner)
    start = state.take_batch_offset() if state is not None else 0
    for idx, data_batch in enumerate(self.dataloader, start):
        self.run_iter(idx, data_batch)
    self.runner.call_hook('after_train_epoch')
    self._epoch += 1


def apply() -> None:
    """Install :func:`run_epoch` on ``EpochBasedTrainLoop``."""
    EpochBasedTrainLoop.run_epoch = run_epoch
