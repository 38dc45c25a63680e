"""Deterministic adaptive average pooling against PyTorch's."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mmrepro.ops import DeterministicAdaptiveAvgPool2d, adaptive_avg_pool2d, routing
from mmrepro.ops.adaptive_pool import swap_adaptive_pools


@pytest.mark.parametrize('shape,size', [
    ((2, 3, 7, 9), 1), ((2, 3, 7, 9), (3, 4)), ((3, 7, 9), (7, 2)), ((2, 3, 5, 5), (None, 2)),
    ((2, 3, 4, 4), (8, 3)), ((0, 3, 4, 4), (2, 2))])
def test_matches_pytorch(shape, size):
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    ours, theirs = adaptive_avg_pool2d(x, size), F.adaptive_avg_pool2d(x, size)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    if x.numel():
        weight = torch.randn_like(theirs)
        g1, = torch.autograd.grad((ours * weight).sum(), x)
        g2, = torch.autograd.grad((theirs * weight).sum(), x)
        assert float(g2.abs().max()) > 0
        torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-12)


def test_swap_keeps_modules_and_uses_the_matrix_path_on_listed_devices(monkeypatch):
    from mmdet.models.layers import AdaptiveAvgPool2d as MMDetPool

    class Custom(nn.AdaptiveAvgPool2d):
        pass

    model = nn.Sequential(nn.AdaptiveAvgPool2d((2, 3)), MMDetPool(1), Custom(1))
    assert swap_adaptive_pools(model) == ['0', '1']
    assert [type(m) for m in model] == [DeterministicAdaptiveAvgPool2d] * 2 + [Custom]
    assert model[0].output_size == (2, 3) and model.state_dict() == {}
    x = torch.randn(2, 3, 5, 7, requires_grad=True)
    calls = []
    real = adaptive_avg_pool2d

    def spy(*args):
        calls.append(args[1])
        return real(*args)
    monkeypatch.setattr('mmrepro.ops.adaptive_pool.adaptive_avg_pool2d', spy)
    model[0](x)
    assert calls == []  # CPU is not a listed device: PyTorch's own op
    monkeypatch.setattr(routing, 'DEVICES', {'cuda', 'cpu'})
    torch.testing.assert_close(model[0](x), F.adaptive_avg_pool2d(x, (2, 3)))
    assert calls == [(2, 3)]
