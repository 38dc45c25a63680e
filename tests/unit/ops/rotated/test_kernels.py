"""fp16 rotated ops: the backward's entries sample where mmcv's fp16 forward samples.

mmcv's fp16 CUDA kernels compute every step of a sampling coordinate in half
(``c10::Half``: each operation in float, rounded to half). The backward must
differentiate that function, not its float32 version. Checked under Triton's
interpreter against a literal transcription of mmcv's coordinate code
(``roi_align_rotated_forward_cuda_kernel``, ``rotated_feature_align_forward_kernel``,
``bilinear_interpolate``) on image-scale boxes where float32 and half coordinates
disagree. Angles go through ``math.cos``/``math.sin`` here (the library's cosine is not
what this checks; its half rounding is).
"""
from __future__ import annotations

import math

import pytest
import torch
from support.repro_utils import skip_unless_triton_kernels_run
from support.roi_align_reference import corner_entries, entry_tensors

from mmrepro.ops.rotated.kernels import feature_align_entries, rotated_entries

skip_unless_triton_kernels_run()

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
#: Image-scale rotated boxes on a 40x50 map at scale 1/8: fractional coordinates in the
#: hundreds, where half has a step of 0.25-0.5 pixel before scaling.
ROIS = [[0, 123.4, 57.9, 211.3, 102.7, 0.37], [1, 307.77, 301.1, 96.6, 133.3, -2.1],
        [0, 401.5, 12.3, 79.9, 59.1, 5.9]]
HEIGHT, WIDTH, SCALE, POOLED = 40, 50, 0.125, (3, 3)


def _rounding(dtype):
    def r(v):  # one c10::Half operation: computed in float, rounded to half
        return torch.tensor(v, dtype=torch.float32).to(dtype).item()
    return r


def roi_transcription(rois, dtype, sampling_ratio, aligned, clockwise):
    """mmcv's RoIAlignRotated coordinates step by step in ``dtype``: per sampling point
    in (RoI, bin, iy, ix) order, its four corner entries and the bin's point count."""
    r = _rounding(dtype)
    points = []
    for roi in rois.tolist():
        scale, offset = r(SCALE), 0.5 if aligned else 0.0
        center_w, center_h = r(r(roi[1] * scale) - offset), r(r(roi[2] * scale) - offset)
        roi_w, roi_h = r(roi[3] * scale), r(roi[4] * scale)
        theta = -roi[5] if clockwise else roi[5]
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = r(roi_h / POOLED[0]), r(roi_w / POOLED[1])
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(bin_h)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(bin_w)
        cos, sin = r(math.cos(theta)), r(math.sin(theta))
        for ph in range(POOLED[0]):
            for pw in range(POOLED[1]):
                for iy in range(grid_h):
                    yy = r(r(-roi_h / 2 + r(ph * bin_h)) + r(r((iy + 0.5) * bin_h) / grid_h))
                    for ix in range(grid_w):
                        xx = r(r(-roi_w / 2 + r(pw * bin_w))
                               + r(r((ix + 0.5) * bin_w) / grid_w))
                        y = r(r(r(yy * cos) - r(xx * sin)) + center_h)
                        x = r(r(r(yy * sin) + r(xx * cos)) + center_w)
                        points.append((corner_entries(HEIGHT, WIDTH, int(roi[0]), y, x, r),
                                       max(grid_h * grid_w, 1)))
    return entry_tensors(points)


#: rotated_feature_align's map: one box per pixel.
MAP_H, MAP_W = 12, 16


def _boxes():
    """One image-scale box per pixel (``[y, x, w, h, angle]``), in and around the map."""
    g = torch.Generator().manual_seed(0)
    boxes = torch.rand(1, MAP_H, MAP_W, 5, generator=g, dtype=torch.float64)
    return boxes * torch.tensor([8 * MAP_H + 20, 8 * MAP_W + 20, 90.0, 70.0, 7.0]) - \
        torch.tensor([10.0, 10.0, 0.0, 0.0, 3.5])


def feature_align_transcription(boxes, dtype):
    """mmcv's rotated_feature_align points step by step in ``dtype``: per (pixel, point),
    its four corner entries."""
    r = _rounding(dtype)
    scale, points = r(SCALE), []
    for b in boxes.reshape(-1, 5).tolist():
        roi_y, roi_x, roi_w, roi_h = (r(v * scale) for v in b[:4])
        w_2, h_2 = r(roi_w / 2), r(roi_h / 2)
        cosa, sina = r(math.cos(b[4])), r(math.sin(b[4]))
        wx, wy, hx, hy = r(cosa * w_2), r(sina * w_2), r(-sina * h_2), r(cosa * h_2)
        py = [roi_y, r(r(roi_y + wy) + hy), r(r(roi_y - wy) + hy), r(r(roi_y - wy) - hy),
              r(r(roi_y + wy) - hy)]
        px = [roi_x, r(r(roi_x + wx) + hx), r(r(roi_x - wx) + hx), r(r(roi_x - wx) - hx),
              r(r(roi_x + wx) - hx)]
        points += [(corner_entries(MAP_H, MAP_W, 0, y, x, r), 1)
                   for y, x in zip(py, px, strict=True)]
    return entry_tensors(points)


@pytest.mark.parametrize('sampling_ratio,aligned,clockwise', [(0, True, False),
                                                              (2, False, True)])
def test_roi_entries_use_the_forwards_half_coordinates(sampling_ratio, aligned, clockwise):
    rois = torch.tensor(ROIS, dtype=torch.float16, device=DEVICE)
    keys, _, weights = rotated_entries(rois, POOLED, SCALE, sampling_ratio, aligned,
                                       clockwise, HEIGHT, WIDTH, 'RoIAlignRotated')
    want_keys, _, want_weights = roi_transcription(rois.cpu(), torch.float16,
                                                   sampling_ratio, aligned, clockwise)
    assert torch.equal(keys.cpu(), want_keys)
    assert torch.equal(weights.cpu(), want_weights)


def test_feature_align_entries_use_the_forwards_half_coordinates():
    boxes = _boxes().to(DEVICE, torch.float16)
    keys, rows, weights = feature_align_entries(boxes, SCALE, 5, MAP_H, MAP_W)
    want_keys, want_weights, _ = feature_align_transcription(boxes.cpu(), torch.float16)
    points, pixels = want_keys.numel(), MAP_H * MAP_W
    assert torch.equal(keys[:points].cpu(), want_keys)
    assert torch.equal(weights[:points].cpu(), want_weights)
    assert torch.equal(rows[:points].cpu(), torch.arange(pixels).repeat_interleave(20).int())
    # Then each pixel's own feature, weight 1.
    assert torch.equal(keys[points:].cpu(), torch.arange(pixels, dtype=torch.int32))
    assert torch.equal(rows[points:], keys[points:])
    assert torch.equal(weights[points:].cpu(), torch.ones(pixels))


def test_float32_coordinates_disagree_on_these_boxes():
    """The tests above can fail: in float32 the same boxes sample elsewhere."""
    rois = torch.tensor(ROIS, dtype=torch.float16)
    for half, single in [(roi_transcription(rois, dtype, 0, True, False)[1]
                          for dtype in (torch.float16, torch.float32)),
                         (feature_align_transcription(_boxes().half(), dtype)[1]
                          for dtype in (torch.float16, torch.float32))]:
        assert half.shape == single.shape
        assert ((half - single).abs() > 1e-3).float().mean() > 0.1
