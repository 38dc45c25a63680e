"""Test-only layers that make training irreproducible on purpose (for check_repro).

Load with ``custom_imports=dict(imports=['mmrepro', 'support.nondeterministic_layer'])`` and
``tests/`` on ``PYTHONPATH``; wrap the neck of a detector config::

    model = dict(neck=dict(_delete_=True, type='NondeterministicNeck', neck=<the FPN>))
"""
from __future__ import annotations

import os
from typing import Sequence, Tuple

import torch
from mmdet.registry import MODELS
from mmengine.model import BaseModule
from torch import Tensor, nn


class UrandomNoise(nn.Module):
    """Scale each feature map by ``1 + scale * u``, ``u`` seeded from ``os.urandom``.

    Seeds cannot reach it (the generator is private and seeded by the OS), so two runs
    differ from the first noisy iteration on. It also calls ``Tensor.put_``, which
    PyTorch reports as nondeterministic in deterministic mode (on CPU too).

    Args:
        start_after: Training forward passes left untouched first (an op that turns
            nondeterministic only for some inputs). Defaults to 0.
        scale: Size of the noise, relative. Defaults to 1e-6.
    """

    def __init__(self, start_after: int = 0, scale: float = 1e-6) -> None:
        super().__init__()
        self.start_after, self.scale, self.calls = start_after, scale, 0

    def forward(self, feats: Sequence[Tensor]) -> Tuple[Tensor, ...]:
        if self.training:
            self.calls += 1
        if self.calls <= self.start_after:
            return tuple(feats)
        generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), 'little'))
        feats[0].new_zeros(2).put_(torch.tensor([1], device=feats[0].device),
                                   feats[0].new_ones(1))
        return tuple(f * (1 + self.scale * torch.rand(f.shape, generator=generator).to(f))
                     for f in feats)


@MODELS.register_module()
class NondeterministicNeck(BaseModule):
    """A neck followed by :class:`UrandomNoise` (child modules ``fpn`` and ``noise``).

    Args:
        neck: Config of the wrapped neck (e.g. ``dict(type='FPN', ...)``).
        start_after: Training iterations without noise first. Defaults to 0.
        scale: Size of the noise, relative. Defaults to 1e-6.
    """

    def __init__(self, neck: dict, start_after: int = 0, scale: float = 1e-6) -> None:
        super().__init__()
        self.fpn = MODELS.build(neck)
        self.noise = UrandomNoise(start_after, scale)

    def forward(self, inputs: Sequence[Tensor]) -> Tuple[Tensor, ...]:
        """The wrapped neck's outputs, each with a little OS-seeded noise."""
        return self.noise(self.fpn(inputs))
