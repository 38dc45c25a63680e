"""The rotated ops' Functions, their Triton backward interpreted on CPU tensors.

``tests/conftest.py`` sets ``TRITON_INTERPRET=1`` where no GPU is visible, so the
Triton code that runs on CUDA runs here. ``RoIAlignRotated`` and
``rotated_feature_align`` are compared with mmcv's CPU ops (forward and gradients);
mmcv has no CPU ``riroi_align_rotated``, so it is compared with a float64 transcription
of mmcv's CUDA kernels (``support/rotated_reference.py``). Sizes are tiny: interpreted
kernels take seconds.
"""
from __future__ import annotations

import pytest
import torch
from support.repro_utils import skip_unless_triton_kernels_run
from support.rotated_reference import riroi_align_rotated_reference

from mmrepro.ops.rotated import riroi_align_rotated, roi_align_rotated, rotated_feature_align

skip_unless_triton_kernels_run()
mmcv_ops = pytest.importorskip('mmcv.ops')

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
#: Rotated boxes [batch, cx, cy, w, h, theta] on a 2-image 7x9 map at scale 0.5: inside,
#: across the border, wholly outside, tiny, larger than the map, angles past +-2 pi.
ROIS = [[0, 8.0, 6.0, 12.0, 8.0, 0.3], [1, 20.0, 16.0, 18.0, 10.0, -1.2],
        [0, 2.0, 2.0, 6.0, 4.0, 7.5], [1, 60.0, 50.0, 4.0, 4.0, 0.0],
        [0, 9.0, 7.0, 0.4, 0.6, -7.0], [1, 9.0, 7.0, 40.0, 30.0, 2.0]]
SHAPE = (2, 8, 7, 9)
SCALE, POOLED = 0.5, (2, 3)


def _inputs(dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    feat = torch.randn(SHAPE, generator=g, dtype=torch.float64).to(DEVICE, dtype)
    return feat, torch.tensor(ROIS, dtype=dtype, device=DEVICE)


def _boxes(dtype):
    """A box per pixel of ``SHAPE``: ``[y, x, w, h, angle]`` in and around the image."""
    g = torch.Generator().manual_seed(1)
    n, _, h, w = SHAPE
    boxes = torch.rand(n, h, w, 5, generator=g, dtype=torch.float64)
    boxes = boxes * torch.tensor([20.0, 24.0, 10.0, 8.0, 8.0], dtype=torch.float64)
    return (boxes - torch.tensor([2.0, 2.0, 0.0, 0.0, 4.0], dtype=torch.float64)).to(
        DEVICE, dtype)


def _grads(fn, feat, *args, seed=2):
    """``(output, input gradient)`` of ``fn(feat, *args)`` for a fixed upstream gradient."""
    x = feat.clone().requires_grad_(True)
    out = fn(x, *args)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64)
    out.backward(g.to(out.device, out.dtype))
    return out.detach(), x.grad


@pytest.mark.parametrize('aligned,clockwise,sampling_ratio',
                         [(True, False, 0), (True, True, 2), (False, True, 0),
                          (False, False, 2)])
def test_roi_align_rotated_equals_mmcv_in_float64(aligned, clockwise, sampling_ratio):
    feat, rois = _inputs(torch.float64)
    args = (rois, POOLED, SCALE, sampling_ratio, aligned, clockwise)
    out, grad = _grads(roi_align_rotated, feat, *args)
    ref_out, ref_grad = _grads(mmcv_ops.roi_align_rotated, feat, *args)
    assert torch.equal(out, ref_out)  # mmcv's own forward
    assert ref_grad.abs().sum() > 0
    torch.testing.assert_close(grad, ref_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('clockwise,num_samples', [(True, 0), (False, 2)])
def test_riroi_align_rotated_equals_the_transcription_in_float64(clockwise, num_samples):
    feat, rois = _inputs(torch.float64)
    out, grad = _grads(riroi_align_rotated, feat, rois[:3], POOLED, SCALE, num_samples, 4,
                       clockwise)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    ref_out, ref_grad = riroi_align_rotated_reference(feat.cpu(), rois[:3].cpu(), g, POOLED,
                                                      SCALE, num_samples, 4, clockwise)
    assert ref_grad.abs().sum() > 0
    torch.testing.assert_close(out.cpu(), ref_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad.cpu(), ref_grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('points', [1, 5])
def test_rotated_feature_align_equals_mmcv_in_float64(points):
    """The five points' angle goes through ``cosf``/``sinf``: mmcv's CPU op takes the C
    library's, mmrepro PyTorch's (on CUDA both are CUDA's); they may differ in the last
    bit of a float, whence the tolerance with 5 points."""
    feat, boxes = _inputs(torch.float64)[0], _boxes(torch.float64)
    out, grad = _grads(rotated_feature_align, feat, boxes, SCALE, points)
    ref_out, ref_grad = _grads(mmcv_ops.rotated_feature_align, feat, boxes, SCALE, points)
    assert torch.equal(out, ref_out)
    tol = 1e-12 if points == 1 else 1e-6
    torch.testing.assert_close(grad, ref_grad, rtol=tol, atol=tol)


def test_float32_is_close_and_repeats_bit_for_bit():
    feat, rois = _inputs(torch.float32)
    feat, rois = feat[:1, :4], rois[[0, 2, 4]]  # fewer pixels, RoIs and points
    cases = [(roi_align_rotated, mmcv_ops.roi_align_rotated,
              (rois, POOLED, SCALE, 0, True, True)),
             (rotated_feature_align, mmcv_ops.rotated_feature_align,
              (_boxes(torch.float32)[:1], SCALE, 5))]
    for ours, theirs, args in cases:
        out, grad = _grads(ours, feat, *args)
        assert torch.equal(_grads(ours, feat, *args)[1], grad)
        ref_out, ref_grad = _grads(theirs, feat, *args)
        assert torch.equal(out, ref_out)
        torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-5)
    args = (rois, POOLED, SCALE, 2, 4, False)
    out, grad = _grads(riroi_align_rotated, feat, *args)
    assert torch.equal(_grads(riroi_align_rotated, feat, *args)[1], grad)
    ref_out, ref_grad = _grads(riroi_align_rotated, feat.double(), rois.double(), *args[1:])
    torch.testing.assert_close(grad.double(), ref_grad, rtol=1e-5, atol=1e-5)


def test_no_rois_give_a_zero_gradient():
    feat, rois = _inputs(torch.float32)
    for fn in (roi_align_rotated, riroi_align_rotated):
        out, grad = _grads(fn, feat, rois[:0], POOLED, SCALE)
        assert out.shape == (0, SHAPE[1], *POOLED) and grad.shape == SHAPE
        assert not grad.any()
