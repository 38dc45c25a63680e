"""The rounding envelope's perturbation: every floating weight moved by one ulp.

``mmrepro-check --against`` and ``mmrepro-diff`` measure how far pure rounding noise
carries training over a few steps by training the same run twice, once as it is and
once with every floating-point parameter moved to the next representable value up or
down, by a pseudo-random sign per value, before the first step and again after every
optimizer step (``ReproducibilityHook(nudge_weights=True)``): each weight rounded the
other way at every step, as other hardware rounds every step otherwise. Random signs,
as rounding errors have: a move of every weight the same way would add up in every sum
of products and weigh many times more. :mod:`mmrepro.checks.envelope` compares the runs.
"""
from __future__ import annotations

import math

import torch
from torch import nn

_SEED = 0x0E1F


@torch.no_grad()
def nudge_weights(model: nn.Module, step: int = 0) -> int:
    """Move every floating-point parameter value of ``model`` one ulp up or down (a
    pseudo-random direction per value, drawn from ``step``: the same on every machine).

    Args:
        model: The model.
        step: The optimizer steps done (0: before the first).

    Returns:
        int: How many values were changed.
    """
    generator = torch.Generator().manual_seed(_SEED + step)
    changed = 0
    for param in model.parameters():
        if param.is_floating_point():
            up = torch.randint(0, 2, param.shape, generator=generator, dtype=torch.bool)
            towards = torch.where(up, math.inf, -math.inf).to(param.device, param.dtype)
            param.copy_(torch.nextafter(param, towards))
            changed += param.numel()
    return changed
