"""``auto_scale_lr`` scales by the global batch, accumulated micro-batches included.

MMEngine's ``Runner.scale_lr`` scales the learning rate by ``batch_size x world_size /
base_batch_size`` and does not count ``optim_wrapper.accumulative_counts``, so one
process with ``k`` micro-batches of ``B`` (standing in for ``k`` ranks of ``B``) would
train at ``1/k`` of the learning rate the ``k`` ranks get. For a Runner that enables
mmrepro, MMEngine's method runs as if the per-rank batch were ``batch_size x
accumulative_counts``: the ratio is ``global batch / base_batch_size``, with the global
batch ``batch_size x ranks x accumulative_counts`` (samples per optimizer step), the
same number, computed the same way, for every layout of that global batch. One line
in the Runner's log says what it scaled by.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from mmengine.runner import Runner
from torch.utils.data import DataLoader

from ..data.global_stream import accumulative_counts
from ..run.layout import Layout
from ..run.state import enabled, find_state

_original_scale_lr = Runner.scale_lr


def scale_lr(self: Runner, optim_wrapper: Any, auto_scale_lr: Optional[Mapping] = None) -> None:
    """``Runner.scale_lr`` by the global batch for an enabled Runner (see the module)."""
    if not enabled(self) or not (auto_scale_lr or {}).get('enable', False):
        return _original_scale_lr(self, optim_wrapper, auto_scale_lr)
    loader = self._train_dataloader
    batch_size = loader.batch_size if isinstance(loader, DataLoader) else loader['batch_size']
    layout = find_state(self).layout or Layout(batch_size, 0, self.world_size,
                                               accumulative_counts(optim_wrapper))
    # MMEngine reads the per-rank batch size from the train loader (a config or a
    # DataLoader) and multiplies it by the world size: give it the micro-batches too.
    self._train_dataloader = dict(batch_size=batch_size * layout.micro)
    try:
        _original_scale_lr(self, optim_wrapper, auto_scale_lr)
    finally:
        self._train_dataloader = loader
    base = auto_scale_lr['base_batch_size']
    self.logger.info(
        f'mmrepro: auto_scale_lr: learning rates scaled by global batch '
        f'{layout.global_batch} / base_batch_size {base} = {layout.global_batch / base} '
        f'(global batch = {layout.world_size} rank(s) x batch_size {batch_size} x '
        f'accumulative_counts {layout.micro}, samples per optimizer step)')


def apply() -> None:
    """Install :func:`scale_lr` on MMEngine's Runner."""
    Runner.scale_lr = scale_lr
