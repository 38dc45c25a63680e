"""fp16/bf16 RoIAlign backward: sampling coordinates computed as the forward computes them.

mmcv's fp16 CUDA forward computes every step of a sampling coordinate in half
(``c10::Half``: each operation in float, rounded to half); mmrepro's bf16 forward does
the same in bfloat16. The backward must differentiate that function, not its float32
version. Checked under Triton's interpreter against a literal transcription of mmcv's
coordinate code (``roi_align_forward_cuda_kernel`` and ``bilinear_interpolate``), on
boxes where float32 and half coordinates disagree.
"""
from __future__ import annotations

import math

import pytest
import torch
from support.repro_utils import skip_unless_triton_kernels_run
from support.roi_align_reference import corner_entries, entry_tensors

from mmrepro.ops.roi_align.kernels import build_entries
from mmrepro.ops.roi_align.plan import corners as _corners
from mmrepro.ops.roi_align.plan import roi_geometry as _roi_geometry

skip_unless_triton_kernels_run()

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
#: Image-scale boxes on an 80x100 map at scale 1/8: fractional coordinates in the
#: hundreds, where half has a step of 0.25-0.5 pixel before scaling.
ROIS = [[0, 123.4, 57.9, 611.3, 402.7], [1, 7.77, 301.1, 96.6, 633.3],
        [0, 401.5, 12.3, 799.9, 590.1], [1, 0.3, 0.7, 40.1, 9.9]]
HEIGHT, WIDTH, SCALE, POOLED = 80, 100, 0.125, (7, 7)


def transcription(rois, dtype, sampling_ratio, aligned):
    """mmcv's RoIAlign coordinates, step by step in ``dtype``: per sampling point in
    (RoI, bin, iy, ix) order, the four corner keys (-1 outside) and weights, and the
    bin's point count."""
    def r(v):  # one c10::Half (or bfloat16) operation: computed in float, rounded
        return torch.tensor(v, dtype=torch.float32).to(dtype).item()
    points = []
    for roi in rois.tolist():
        offset, scale = r(0.5 if aligned else 0.0), r(SCALE)
        start_w, start_h = r(r(roi[1] * scale) - offset), r(r(roi[2] * scale) - offset)
        roi_w = r(r(r(roi[3] * scale) - offset) - start_w)
        roi_h = r(r(r(roi[4] * scale) - offset) - start_h)
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = r(roi_h / POOLED[0]), r(roi_w / POOLED[1])
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(r(roi_h / POOLED[0]))
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(r(roi_w / POOLED[1]))
        count = max(grid_h * grid_w, 1)
        for ph in range(POOLED[0]):
            for pw in range(POOLED[1]):
                for iy in range(grid_h):
                    y = r(r(start_h + r(ph * bin_h)) + r(r((iy + 0.5) * bin_h) / grid_h))
                    for ix in range(grid_w):
                        x = r(r(start_w + r(pw * bin_w)) + r(r((ix + 0.5) * bin_w) / grid_w))
                        points.append((corner_entries(HEIGHT, WIDTH, int(roi[0]), y, x, r),
                                       count))
    return points


@pytest.mark.parametrize('aligned', [True, False])
@pytest.mark.parametrize('sampling_ratio', [0, 2])
@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_backward_entries_use_the_forwards_coordinates(dtype, sampling_ratio, aligned):
    rois = torch.tensor(ROIS, dtype=dtype, device=DEVICE)
    geometry = _roi_geometry(rois, *POOLED, SCALE, sampling_ratio, aligned)
    keys, _, weights = build_entries(geometry, rois[:, 0].long(), POOLED, HEIGHT, WIDTH,
                                     dtype)
    want_keys, _, want_weights = entry_tensors(transcription(rois.cpu(), dtype, sampling_ratio,
                                                         aligned))
    assert torch.equal(keys.cpu(), want_keys)
    assert torch.equal(weights.cpu(), want_weights)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_float32_coordinates_disagree_on_these_boxes(dtype):
    """The test above can fail: in float32 the same boxes sample elsewhere."""
    rois = torch.tensor(ROIS, dtype=dtype)
    half = entry_tensors(transcription(rois, dtype, 0, True))
    single = entry_tensors(transcription(rois, torch.float32, 0, True))
    assert half[0].shape == single[0].shape
    differ = (half[1] - single[1]).abs() > 1e-3
    assert differ.float().mean() > 0.1


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_pytorch_forward_samples_where_the_transcription_does(dtype):
    """mmrepro's PyTorch forward (bf16's forward on CUDA) computes the same weights."""
    rois = torch.tensor(ROIS, dtype=dtype, device=DEVICE)
    geometry = _roi_geometry(rois, *POOLED, SCALE, 2, True)
    index, weight, _ = _corners(rois, geometry[:4], 2, 2, *POOLED, HEIGHT, WIDTH)
    # (4 corners, G points, K*bins) -> (K, bins, G, 4), the transcription's order.
    k, bins = len(ROIS), POOLED[0] * POOLED[1]
    weight = weight.reshape(4, 4, k, bins).permute(2, 3, 1, 0).reshape(-1).float()
    keys, want, _ = entry_tensors(transcription(rois.cpu(), dtype, 2, True))
    assert torch.equal(weight.cpu(), want)
    index = index.reshape(4, 4, k, bins).permute(2, 3, 1, 0).reshape(-1)
    inside = keys >= 0
    assert torch.equal(index.cpu()[inside], keys[inside].long())
