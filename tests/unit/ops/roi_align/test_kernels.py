"""The CUDA RoIAlign backward's kernels, on CPU tensors through Triton's interpreter.

``tests/conftest.py`` sets ``TRITON_INTERPRET=1`` where no GPU is visible, so the same
Triton code that runs on CUDA runs here, against a literal float64 transcription of
mmcv's CUDA backward (``roi_align_backward_cuda_kernel``). Sizes are tiny: interpreted
kernels take seconds.
"""
from __future__ import annotations

import math

import pytest
import torch
from support.repro_utils import skip_unless_triton_kernels_run
from support.roi_align_reference import bilinear_gradient

from mmrepro.ops.roi_align.kernels import build_entries, csr_rows, roi_align_backward
from mmrepro.ops.roi_align.plan import roi_geometry as _roi_geometry

skip_unless_triton_kernels_run()

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
#: Boxes on a 2-image 7x9 map at scale 0.5: inside, partly and wholly outside,
#: zero-size, tiny, larger than the map, and one that is only a point at the border.
ROIS = [[0, 2.0, 3.0, 11.0, 9.0], [1, -6.0, -3.0, 5.0, 4.0], [0, 20.0, 20.0, 30.0, 25.0],
        [1, 4.0, 4.0, 4.0, 4.0], [0, 3.3, 1.1, 3.6, 1.4], [1, -4.0, -4.0, 24.0, 20.0],
        [0, 17.0, 13.0, 18.0, 14.0]]
SHAPE = (2, 3, 7, 9)
SCALE = 0.5


def reference_backward(grad_output, rois, shape, scale, sampling_ratio, aligned):
    """mmcv's CUDA RoIAlign backward (``avg``), loop for loop, in float64."""
    grad = torch.zeros(shape, dtype=torch.float64)
    go = grad_output.double()
    pooled_h, pooled_w = go.shape[2:]
    for k, roi in enumerate(rois.double().tolist()):
        offset = 0.5 if aligned else 0.0
        start_w, start_h = roi[1] * scale - offset, roi[2] * scale - offset
        roi_w = roi[3] * scale - offset - start_w
        roi_h = roi[4] * scale - offset - start_h
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_h / pooled_h)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_w / pooled_w)
        count = grid_h * grid_w
        for ph in range(pooled_h):
            for pw in range(pooled_w):
                g = go[k, :, ph, pw]
                for iy in range(grid_h):
                    y = start_h + ph * bin_h + (iy + 0.5) * bin_h / grid_h
                    for ix in range(grid_w):
                        x = start_w + pw * bin_w + (ix + 0.5) * bin_w / grid_w
                        for yy, xx, w in bilinear_gradient(shape[2], shape[3], y, x):
                            grad[int(roi[0]), :, yy, xx] += g * w / count
    return grad


def _case(dtype, pooled=(2, 3), seed=0):
    rois = torch.tensor(ROIS, dtype=dtype, device=DEVICE)
    g = torch.Generator().manual_seed(seed)
    grad_output = torch.randn((len(ROIS), SHAPE[1], *pooled), generator=g).to(DEVICE, dtype)
    return rois, grad_output


def _backward(grad_output, rois, sampling_ratio, aligned):
    geometry = _roi_geometry(rois, grad_output.size(2), grad_output.size(3), SCALE,
                             sampling_ratio, aligned)
    return roi_align_backward(grad_output, geometry, rois[:, 0].long(), torch.Size(SHAPE))


@pytest.mark.parametrize('aligned', [True, False])
@pytest.mark.parametrize('sampling_ratio', [0, 2])
def test_backward_equals_mmcv_literal_reference_in_float64(aligned, sampling_ratio):
    rois, grad_output = _case(torch.float64)
    grad = _backward(grad_output, rois, sampling_ratio, aligned)
    ref = reference_backward(grad_output.cpu(), rois.cpu(), SHAPE, SCALE, sampling_ratio,
                             aligned)
    assert grad.dtype == torch.float64 and grad.is_contiguous()
    assert ref.abs().sum() > 0
    torch.testing.assert_close(grad.cpu(), ref, rtol=1e-12, atol=1e-12)


def test_float32_accumulates_in_float32_and_repeats_bit_for_bit():
    rois, grad_output = _case(torch.float32)
    first = _backward(grad_output, rois, 0, True)
    ref = reference_backward(grad_output.cpu(), rois.cpu(), SHAPE, SCALE, 0, True)
    torch.testing.assert_close(first.cpu().double(), ref, rtol=1e-5, atol=1e-6)
    assert torch.equal(_backward(grad_output, rois, 0, True), first)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_inputs_accumulate_in_float32(dtype):
    rois, grad_output = _case(dtype)
    grad = _backward(grad_output, rois, 2, True)
    assert grad.dtype == dtype
    ref = reference_backward(grad_output.cpu(), rois.cpu(), SHAPE, SCALE, 2, True)
    # One rounding of the float32 sum to the half type, not one per added term.
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(grad.cpu().double(), ref, rtol=2 * eps, atol=4 * eps)


def test_entries_are_mmcv_corners_in_a_fixed_order():
    """Entries of one pixel keep their (RoI, bin, point, corner) order after the sort."""
    rois, _ = _case(torch.float64)
    geometry = _roi_geometry(rois, 2, 3, SCALE, 0, True)
    keys, rows, weights = build_entries(geometry, rois[:, 0].long(), (2, 3), 7, 9,
                                        torch.float64)
    grid = (geometry[4] * geometry[5]).tolist()
    assert keys.numel() == 4 * 6 * sum(grid)
    # Every entry row belongs to the RoI whose points it was written for.
    owner = torch.repeat_interleave(torch.arange(len(ROIS), device=DEVICE),
                                    torch.tensor(grid, device=DEVICE) * 6 * 4)
    assert torch.equal(rows.long() // 6, owner)
    outside = keys == -1
    assert outside.any() and not outside.all()  # the RoI beyond the map has no pixel
    assert torch.equal(weights[outside], torch.zeros_like(weights[outside]))
    order, row_ptr = csr_rows(keys, 2 * 7 * 9)
    assert row_ptr[0] == outside.sum() and row_ptr[-1] == keys.numel()
    for p in range(2 * 7 * 9):
        span = order[row_ptr[p]:row_ptr[p + 1]]
        assert torch.all(keys[span] == p) and torch.all(span[1:] > span[:-1])


def test_no_rois_gives_a_zero_gradient():
    rois = torch.zeros((0, 5), dtype=torch.float32, device=DEVICE)
    grad_output = torch.zeros((0, SHAPE[1], 2, 2), device=DEVICE)
    grad = _backward(grad_output, rois, 0, True)
    assert grad.shape == SHAPE and not grad.any()


@pytest.mark.parametrize('sampling_ratio', [0, 2])
def test_function_forward_is_mmcv_and_gradient_matches_it(sampling_ratio):
    """The CUDA path's autograd Function, on this device: mmcv's forward, our backward."""
    mmcv_ops = pytest.importorskip('mmcv.ops')
    from mmrepro.ops.roi_align.cuda import TritonRoIAlignFunction
    rois, grad_output = _case(torch.float32)
    feat = torch.randn(SHAPE, generator=torch.Generator().manual_seed(3)).to(DEVICE)
    mine, ref = feat.clone().requires_grad_(True), feat.clone().requires_grad_(True)
    out = TritonRoIAlignFunction.apply(mine, rois, 2, 3, SCALE, sampling_ratio, True, 1 << 22)
    expected = mmcv_ops.RoIAlign((2, 3), SCALE, sampling_ratio, 'avg', True)(ref, rois)
    assert torch.equal(out, expected)  # the same kernel
    out.backward(grad_output)
    expected.backward(grad_output)
    scale = ref.grad.abs().max().item()
    torch.testing.assert_close(mine.grad, ref.grad, rtol=1e-5, atol=1e-5 * scale)
