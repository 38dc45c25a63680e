"""The rotated ops on CUDA: run-to-run bits and agreement with mmcv's CUDA ops.

The ``cuda`` tier (``bash tools/test_cuda.sh``); skipped without a GPU. Sizes are those
of mmrotate's DOTA models (1024x1024 images, stride-8 and stride-16 levels, 256
channels; ReDet's 32 fields x 8 orientations).
"""
from __future__ import annotations

import math

import pytest
import torch

from mmrepro.ops.rotated import riroi_align_rotated, roi_align_rotated, rotated_feature_align

pytestmark = pytest.mark.cuda
mmcv_ops = pytest.importorskip('mmcv.ops')


def _rois(n_rois, size, g, dtype):
    """Rotated boxes over a ``size`` image, some beyond its border, some tiny."""
    centers = torch.rand(n_rois, 2, generator=g) * (size + 200) - 100
    wh = torch.exp(torch.rand(n_rois, 2, generator=g) * 4 + 1.5)
    theta = (torch.rand(n_rois, 1, generator=g) - 0.5) * 3 * math.pi
    batch = torch.randint(0, 2, (n_rois, 1), generator=g).float()
    rois = torch.cat([batch, centers, wh, theta], 1)
    rois[:4, 3:5] = 0.1  # below a pixel
    return rois.to('cuda', dtype)


def _case(dtype=torch.float32, channels=256, side=128, n_rois=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    feat = torch.randn((2, channels, side, side), generator=g).to('cuda', dtype)
    return feat, _rois(n_rois, side * 8, g, dtype)


def _boxes(feat, seed=1):
    """R3Det's refined boxes: one per pixel, ``[y, x, w, h, angle]`` at image scale."""
    n, _, h, w = feat.shape
    g = torch.Generator().manual_seed(seed)
    boxes = torch.rand(n, h, w, 5, generator=g)
    boxes = boxes * torch.tensor([8.0 * h + 40, 8.0 * w + 40, 200, 120, 2 * math.pi])
    boxes -= torch.tensor([20.0, 20.0, 0.0, 0.0, math.pi])
    return boxes.to('cuda', feat.dtype)


def _run(fn, feat, *args, seed=2):
    x = feat.clone().requires_grad_(True)
    out = fn(x, *args)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))
    out.backward(g.to(out.device, out.dtype))
    return out.detach(), x.grad


def _check(ours, theirs, feat, *args, rtol=1e-5):
    """Bitwise run to run; mmcv's own forward; gradients close to mmcv's."""
    out, grad = _run(ours, feat, *args)
    for _ in range(2):
        again = _run(ours, feat, *args)
        assert torch.equal(again[0], out) and torch.equal(again[1], grad)
    ref_out, ref_grad = _run(theirs, feat, *args)
    assert torch.equal(out, ref_out)
    scale = ref_grad.abs().max().item()
    assert scale > 0
    torch.testing.assert_close(grad.float(), ref_grad.float(), rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize('aligned,clockwise,sampling_ratio', [(True, True, 2),
                                                              (False, False, 0)])
def test_roi_align_rotated(aligned, clockwise, sampling_ratio):
    feat, rois = _case()
    _check(roi_align_rotated, mmcv_ops.roi_align_rotated, feat, rois, 7, 0.125,
           sampling_ratio, aligned, clockwise)


def test_riroi_align_rotated():
    feat, rois = _case(side=64, n_rois=256)
    _check(riroi_align_rotated, mmcv_ops.riroi_align_rotated, feat, rois, 7, 0.125, 2,
           8, True)


@pytest.mark.parametrize('points', [1, 5])
def test_rotated_feature_align(points):
    feat, _ = _case()
    _check(rotated_feature_align, mmcv_ops.rotated_feature_align, feat, _boxes(feat), 0.125,
           points)


def test_half_precision():
    feat, rois = _case(torch.float16, n_rois=128)
    _check(roi_align_rotated, mmcv_ops.roi_align_rotated, feat, rois, 7, 0.125, 2, True,
           True, rtol=2e-3)
    _check(riroi_align_rotated, mmcv_ops.riroi_align_rotated, feat, rois, 7, 0.125, 2, 8,
           True, rtol=2e-3)
    _check(rotated_feature_align, mmcv_ops.rotated_feature_align, feat, _boxes(feat), 0.125,
           5, rtol=2e-3)


@pytest.mark.parametrize('op', ['roi_align_rotated', 'riroi_align_rotated',
                                'rotated_feature_align'])
def test_host_syncs(op):
    """One in a RoI op's backward (the number of entries), none otherwise."""
    from support.repro_utils import host_syncs
    feat, rois = _case(n_rois=64)
    fn, args, backward_syncs = {
        'roi_align_rotated': (roi_align_rotated, (rois, 7, 0.125, 2, True, True), 1),
        'riroi_align_rotated': (riroi_align_rotated, (rois, 7, 0.125, 2, 8, True), 1),
        'rotated_feature_align': (rotated_feature_align, (_boxes(feat), 0.125, 5), 0)}[op]
    x = feat.clone().requires_grad_(True)
    _run(fn, feat, *args)  # warm: Triton compiles on the first call
    out = []
    assert host_syncs(lambda: out.append(fn(x, *args))) == 0
    assert host_syncs(lambda: out[0].backward(torch.ones_like(out[0]))) == backward_syncs
