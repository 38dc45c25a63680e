"""The rotated ops' sampling geometry keeps mmcv's conversions (no Triton needed)."""
from __future__ import annotations

import math

import torch

from mmrepro.ops.rotated.geometry import (
    cyclic_shift,
    feature_align_points,
    orientation_shift,
    rotated_roi_geometry,
)


def _c_orientation(theta: float, num_orientations: int):
    """mmcv's ``ind``/``l_var``/``r_var`` in C (float64 kernel), with C's ``%``."""
    ind_float = theta * num_orientations / (2 * math.pi)
    ind = math.floor(float(torch.tensor(ind_float, dtype=torch.float32)))  # floorf
    l_var = ind_float - ind
    ind = int(math.fmod(ind + num_orientations, num_orientations))
    return ind, l_var, 1.0 - l_var


def test_orientation_shift_follows_cs_arithmetic():
    # Angles past +-2 pi, negative ones, and one whose index is a hair below 3 in double
    # but 3 in float (floorf): l_var is then slightly negative, as in mmcv.
    below_three = (3 - 1e-12) * 2 * math.pi / 4
    thetas = [0.3, -1.2, 7.5, -7.0, -13.0, below_three, 0.0]
    shift, l_var, r_var = orientation_shift(torch.tensor(thetas, dtype=torch.float64), 4)
    for k, theta in enumerate(thetas):
        ind, left, right = _c_orientation(theta, 4)
        # mmcv reads input orientation (o - ind + O) % O: the same as (o - shift) mod O.
        assert all((o - ind + 4) % 4 == (o - shift[k].item()) % 4 for o in range(4))
        assert l_var[k].item() == left and r_var[k].item() == right
    assert l_var[thetas.index(below_three)] < 0


def test_cyclic_shift_and_its_adjoint():
    t = torch.arange(2 * 6 * 2, dtype=torch.float64).view(2, 6, 2)  # K=2, C=2 fields, O=3
    shift = torch.tensor([1, -1])
    out = cyclic_shift(t, shift, 3)
    for k in range(2):
        for c in range(2):
            for j in range(3):
                src = c * 3 + (j + shift[k].item()) % 3
                assert torch.equal(out[k, c * 3 + j], t[k, src])
    # The backward mixes with the opposite shift: <shift(a, -s), g> == <a, shift(g, s)>.
    a, g = torch.randn(2, 6, 2, dtype=torch.float64), torch.randn(2, 6, 2, dtype=torch.float64)
    torch.testing.assert_close((cyclic_shift(a, -shift, 3) * g).sum(),
                               (a * cyclic_shift(g, shift, 3)).sum())


def test_adaptive_grid_ceils_in_float_as_ceilf():
    """float64 bins just above an integer round to it in float: ceilf keeps the integer."""
    rois = torch.tensor([[0, 5.0, 5.0, 4.0, 2 * (2 + 1e-12), 0.0]], dtype=torch.float64)
    _, (grid_h, grid_w, count) = rotated_roi_geometry(rois, (2, 2), 1.0, 0, True, False)
    assert (grid_h.item(), grid_w.item(), count.item()) == (2, 2, 4)


def test_roi_geometry_rotates_about_the_center():
    rois = torch.tensor([[0, 8.0, 6.0, 4.0, 2.0, math.pi / 2]], dtype=torch.float64)
    per_roi, grid = rotated_roi_geometry(rois, (1, 2), 0.5, 1, False, True)
    start_h, start_w, bin_h, bin_w, center_h, center_w, cos, sin = (v.item() for v in per_roi)
    assert (start_h, start_w, bin_h, bin_w) == (-0.5, -1.0, 1.0, 1.0)
    assert (center_h, center_w) == (3.0, 4.0)  # no -0.5 when not aligned
    assert sin == -1.0 and abs(cos) < 1e-15  # clockwise negates the angle
    assert [g.item() for g in grid] == [1, 1, 1]


def test_feature_align_points_are_the_center_then_the_corners():
    box = torch.tensor([[[[8.0, 4.0, 6.0, 2.0, 0.0]]]], dtype=torch.float64)  # y, x, w, h
    ys, xs = feature_align_points(box, 0.5, 5)
    assert ys.tolist() == [[4.0, 4.5, 4.5, 3.5, 3.5]]
    assert xs.tolist() == [[2.0, 3.5, 0.5, 0.5, 3.5]]
    assert feature_align_points(box, 0.5, 1).tolist() == [[[4.0]], [[2.0]]]
