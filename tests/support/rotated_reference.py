"""mmcv's CUDA ``RiRoIAlignRotated`` transcribed loop for loop (the kernel tests' reference).

mmcv 2.1.0 has no CPU ``riroi_align_rotated``, so its forward and backward are compared
with this transcription of ``riroi_align_rotated_cuda_kernel.cuh``: one thread's work per
(RoI, field, orientation, bin), in float64 (``ceilf``/``floorf`` round to float first, as
in C++), the ``atomicAdd``s in the kernel's order.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from support.roi_align_reference import bilinear_gradient


def _c_mod(a: int, b: int) -> int:
    """C's ``%``: the remainder takes the dividend's sign."""
    return int(math.fmod(a, b))


def _float(v: float) -> float:
    return float(np.float32(v))


def riroi_align_rotated_reference(features, rois, grad_output, pooled, spatial_scale,
                                  num_samples, num_orientations, clockwise):
    """``(output, grad_features)`` of mmcv's CUDA kernels, in float64."""
    feat = features.double()
    go = grad_output.double()
    n, channels, height, width = feat.shape
    fields = channels // num_orientations
    out = torch.zeros(rois.size(0), channels, *pooled, dtype=torch.float64)
    grad = torch.zeros_like(feat)
    scale = _float(spatial_scale)  # a C++ float argument
    for k, roi in enumerate(rois.double().tolist()):
        b = int(roi[0])
        center_w, center_h = roi[1] * scale, roi[2] * scale
        roi_w, roi_h = max(roi[3] * scale, 1.0), max(roi[4] * scale, 1.0)
        theta = roi[5]
        bin_h, bin_w = roi_h / pooled[0], roi_w / pooled[1]
        ind_float = theta * num_orientations / (2 * math.pi)
        ind = math.floor(_float(ind_float))
        l_var = ind_float - ind
        r_var = 1.0 - l_var
        ind = _c_mod(ind + num_orientations, num_orientations)
        grid_h = num_samples if num_samples > 0 else math.ceil(_float(roi_h / pooled[0]))
        grid_w = num_samples if num_samples > 0 else math.ceil(_float(roi_w / pooled[1]))
        if clockwise:
            theta = -theta
        cos, sin = math.cos(theta), math.sin(theta)
        count = max(grid_h * grid_w, 1)
        for c in range(fields):
            for o in range(num_orientations):
                rot = _c_mod(o - ind + num_orientations, num_orientations)
                rot_plus = _c_mod(rot + 1 + num_orientations, num_orientations)
                plane = b, c * num_orientations + rot
                plane_plus = b, c * num_orientations + rot_plus
                for ph in range(pooled[0]):
                    for pw in range(pooled[1]):
                        value = 0.0
                        g = go[k, c * num_orientations + o, ph, pw].item()
                        for iy in range(grid_h):
                            yy = -roi_h / 2 + ph * bin_h + (iy + 0.5) * bin_h / grid_h
                            for ix in range(grid_w):
                                xx = -roi_w / 2 + pw * bin_w + (ix + 0.5) * bin_w / grid_w
                                y = yy * cos - xx * sin + center_h
                                x = yy * sin + xx * cos + center_w
                                corners = bilinear_gradient(height, width, y, x)
                                val = sum(w * feat[(*plane, py, px)].item()
                                          for py, px, w in corners)
                                val_plus = sum(w * feat[(*plane_plus, py, px)].item()
                                               for py, px, w in corners)
                                value += r_var * val + l_var * val_plus
                                for py, px, w in corners:
                                    grad[(*plane, py, px)] += g * w / count * r_var
                                    grad[(*plane_plus, py, px)] += g * w / count * l_var
                        out[k, c * num_orientations + o, ph, pw] = value / count
    return out, grad
