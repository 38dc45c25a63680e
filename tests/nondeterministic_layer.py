"""Test-only layers that make training irreproducible on purpose (for check_repro).

Load with ``custom_imports=dict(imports=['mmrepro', 'nondeterministic_layer'])`` and
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
    """Scale each feature map by ``1 + 1e-6 * u``, ``u`` seeded from ``os.urandom``.

    Seeds cannot reach it (the generator is private and seeded by the OS), so two runs
    differ from the first iteration on. It also calls ``Tensor.put_``, which PyTorch
    reports as nondeterministic in deterministic mode (on CPU too).
    """

    def forward(self, feats: Sequence[Tensor]) -> Tuple[Tensor, ...]:
        generator = torch.Generator().manual_seed(int.from_bytes(os.urandom(7), 'little'))
        feats[0].new_zeros(2).put_(torch.tensor([1], device=feats[0].device),
                                   feats[0].new_ones(1))
        return tuple(f * (1 + 1e-6 * torch.rand(f.shape, generator=generator).to(f))
                     for f in feats)


@MODELS.register_module()
class NondeterministicNeck(BaseModule):
    """A neck followed by :class:`UrandomNoise` (child modules ``fpn`` and ``noise``).

    Args:
        neck: Config of the wrapped neck (e.g. ``dict(type='FPN', ...)``).
    """

    def __init__(self, neck: dict) -> None:
        super().__init__()
        self.fpn = MODELS.build(neck)
        self.noise = UrandomNoise()

    def forward(self, inputs: Sequence[Tensor]) -> Tuple[Tensor, ...]:
        """The wrapped neck's outputs, each with a little OS-seeded noise."""
        return self.noise(self.fpn(inputs))
