"""mmrepro's deformable ops on CUDA: run-to-run bits and agreement with the originals.

The ``cuda`` tier (``bash tools/test_cuda.sh``); skipped without a GPU. Shapes are
those of the zoo's R50 models at 1333x800 (a DCN stage-4 layer, a Deformable DETR
encoder layer, Mask2Former's point losses, RTMDet's channel attention).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mmrepro.ops import adaptive_avg_pool2d, deformable

pytestmark = pytest.mark.cuda
mmcv_ops = pytest.importorskip('mmcv.ops')
from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction  # noqa: E402


def _randn(*shape, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * scale).cuda().requires_grad_()


def _grads(fn, inputs, seed=9):
    out = fn(*inputs)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).cuda()
    grads = torch.autograd.grad(out, inputs, g)
    return [out.detach(), *grads]


def _check(ours, theirs, inputs):
    first = _grads(ours, inputs)
    for _ in range(3):
        assert all(torch.equal(a, b) for a, b in zip(_grads(ours, inputs), first, strict=True))
    for a, b in zip(first, _grads(theirs, inputs), strict=True):
        scale = b.abs().max().item()
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4 * scale)


def _msda_case():
    shapes = torch.tensor([[100, 168], [50, 84], [25, 42], [13, 21]], device='cuda')
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    keys = int(sizes.sum())
    value = _randn(2, keys, 8, 32)
    loc = (torch.rand(2, keys, 8, 4, 4, 2, generator=torch.Generator().manual_seed(1))
           * 1.1 - 0.05).cuda().requires_grad_()
    weights = torch.rand(2, keys, 8, 4, 4, generator=torch.Generator().manual_seed(2))
    weights = (weights / weights.sum((-1, -2), keepdim=True)).cuda().requires_grad_()
    return value, shapes, starts, loc, weights


def test_ms_deform_attn():
    value, shapes, starts, loc, weights = _msda_case()
    _check(lambda v, p, w: deformable.ms_deform_attn(v, shapes, starts, p, w),
           lambda v, p, w: MultiScaleDeformableAttnFunction.apply(v, shapes, starts, p, w, 64),
           (value, loc, weights))


@pytest.mark.parametrize('modulated', [False, True])
def test_deform_conv2d(modulated):
    x, weight = _randn(2, 256, 50, 84), _randn(256, 256, 3, 3, seed=1, scale=0.02)
    offset = _randn(2, 18, 50, 84, seed=2, scale=2.0)
    if modulated:
        mask, bias = _randn(2, 9, 50, 84, seed=3).sigmoid(), _randn(256, seed=4)
        _check(lambda *t: deformable.deform_conv2d(*t[:3], 1, 1, mask=t[3], bias=t[4]),
               lambda *t: mmcv_ops.modulated_deform_conv2d(t[0], t[1], t[3], t[2], t[4], 1, 1),
               (x, offset, weight, mask.detach().requires_grad_(),
                bias.detach().requires_grad_()))
    else:
        _check(lambda *t: deformable.deform_conv2d(*t, 1, 1),
               lambda *t: mmcv_ops.deform_conv2d(*t, 1, 1), (x, offset, weight))


def test_grid_sample_point_sample():
    masks = _randn(2, 100, 200, 336)
    points = (torch.rand(2, 100 * 12544 // 100, 1, 2) * 2 - 1).cuda().requires_grad_()
    _check(lambda m, p: deformable.grid_sample(m, p),
           lambda m, p: F.grid_sample(m, p, align_corners=False), (masks, points))


def test_adaptive_avg_pool2d():
    x = _randn(2, 384, 25, 42)
    _check(lambda t: adaptive_avg_pool2d(t, 1), lambda t: F.adaptive_avg_pool2d(t, 1), (x,))


def test_no_host_syncs():
    from support.repro_utils import host_syncs
    value, shapes, starts, loc, weights = _msda_case()
    masks = _randn(2, 4, 64, 64)
    points = (torch.rand(2, 500, 1, 2) * 2 - 1).cuda().requires_grad_()
    x, weight = _randn(2, 64, 32, 32), _randn(64, 64, 3, 3, seed=1, scale=0.02)
    offset = _randn(2, 18, 32, 32, seed=2, scale=2.0)
    calls = {'ms_deform_attn': lambda: deformable.ms_deform_attn(value, shapes, starts, loc,
                                                                 weights),
             'grid_sample': lambda: deformable.grid_sample(masks, points),
             'deform_conv2d': lambda: deformable.deform_conv2d(x, offset, weight, 1, 1)}
    for name, call in calls.items():
        call().sum().backward()  # warm: Triton compiles on the first call
        assert host_syncs(lambda c=call: c().sum().backward()) == 0, name
