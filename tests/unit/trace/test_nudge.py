"""mmrepro.trace.nudge: the rounding envelope's one-ulp move of every weight."""
import math

import torch
from torch import nn

from mmrepro.trace.nudge import nudge_weights


def _model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.Linear(32, 4))
    model[1].weight.data.normal_()  # no value 1.0 everywhere
    return model


def test_every_floating_weight_moves_by_exactly_one_ulp_either_way():
    model, before = _model(), _model()
    count = nudge_weights(model)
    assert count == sum(p.numel() for p in model.parameters())
    ups = 0
    for new, old in zip(model.parameters(), before.parameters(), strict=True):
        up = torch.nextafter(old, torch.full_like(old, math.inf))
        down = torch.nextafter(old, torch.full_like(old, -math.inf))
        assert bool(((new == up) | (new == down)).all())
        ups += int((new == up).sum())
    assert 0.4 < ups / count < 0.6  # random signs, as rounding errors have
    assert torch.equal(model[1].running_mean, before[1].running_mean)  # buffers stay


def test_the_directions_are_the_same_on_every_call():
    a, b = _model(), _model()
    nudge_weights(a)
    nudge_weights(b)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
