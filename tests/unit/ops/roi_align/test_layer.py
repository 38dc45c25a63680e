"""DeterministicRoIAlign against mmcv.ops.RoIAlign (CPU kernel) and its determinism."""
from __future__ import annotations

import itertools
from typing import Tuple

import pytest
import torch
from torch import nn

from mmrepro.ops import DeterministicRoIAlign, deterministic_roi_align, replace_roi_align

mmcv_ops = pytest.importorskip('mmcv.ops')

#: (output_size, feature (H, W), spatial_scale)
GEOMETRIES = [(7, (13, 17), 0.25), ((3, 5), (8, 8), 1.0), (2, (20, 11), 0.5)]


def assert_grad_close(grad: torch.Tensor, ref: torch.Tensor) -> None:
    """float32 gradients agree up to the order of the accumulation.

    mmcv adds ``grad * w / count`` per sampling point in loop order; autograd adds
    ``grad / count * w`` in the order of the index. Where many terms of both signs meet,
    the difference is a few ulp of the largest gradient, hence the scaled ``atol``.
    """
    scale = max(1.0, ref.abs().max().item())
    torch.testing.assert_close(grad, ref, rtol=1e-5, atol=1e-5 * scale)


def make_rois(feat_hw: Tuple[int, int], scale: float, seed: int) -> torch.Tensor:
    """Boxes on a 2-image batch: inside, partly/fully outside, tiny, huge, zero-size."""
    g = torch.Generator().manual_seed(seed)
    img_h, img_w = feat_hw[0] / scale, feat_hw[1] / scale
    k = 24
    cx = (torch.rand(k, generator=g) * 1.6 - 0.3) * img_w
    cy = (torch.rand(k, generator=g) * 1.6 - 0.3) * img_h
    size = torch.rand(k, generator=g) ** 3 * 1.5  # many small boxes, a few huge
    bw, bh = size * img_w, size * img_h * (0.5 + torch.rand(k, generator=g))
    bw[:3] = torch.tensor([0.05, 0.3, 0.0])  # tiny and zero-width boxes
    bh[:3] = torch.tensor([0.02, 0.7, 0.0])
    batch = (torch.arange(k) % 2).float()
    return torch.stack([batch, cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], dim=1)


def run(layer: nn.Module, feat: torch.Tensor, rois: torch.Tensor, grad_out_seed: int = 1):
    """Forward and input-gradient of ``layer`` for a fixed random upstream gradient."""
    x = feat.clone().requires_grad_(True)
    out = layer(x, rois)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_out_seed),
                    dtype=out.dtype)
    (out * g).sum().backward()
    return out.detach(), x.grad


@pytest.mark.parametrize('pool_mode,aligned,sampling_ratio,geometry', [
    pytest.param(*c, id=f'{c[0]}-aligned{c[1]}-sr{c[2]}-geom{GEOMETRIES.index(c[3])}')
    for c in itertools.product(['avg', 'max'], [True, False], [0, 2], GEOMETRIES)])
def test_matches_mmcv(pool_mode, aligned, sampling_ratio, geometry):
    """Forward is bit-identical to mmcv's CPU kernel; input gradients match tightly."""
    output_size, feat_hw, scale = geometry
    feat = torch.randn(2, 3, *feat_hw, generator=torch.Generator().manual_seed(0))
    rois = make_rois(feat_hw, scale, seed=sum(feat_hw))
    args = (output_size, scale, sampling_ratio, pool_mode, aligned)
    ref_out, ref_grad = run(mmcv_ops.RoIAlign(*args), feat, rois)
    out, grad = run(DeterministicRoIAlign(*args), feat, rois)
    torch.testing.assert_close(out, ref_out, rtol=0, atol=0)
    assert_grad_close(grad, ref_grad)


def test_matches_mmcv_float64_and_chunking():
    """float64 inputs, and chunked processing gives bit-identical results."""
    feat = torch.randn(2, 4, 9, 10, dtype=torch.float64)
    rois = make_rois((9, 10), 0.5, seed=3).double()
    args = (4, 0.5, 0, 'avg', True)
    ref_out, ref_grad = run(mmcv_ops.RoIAlign(*args), feat, rois)
    layer = DeterministicRoIAlign(*args)
    out, grad = run(layer, feat, rois)
    torch.testing.assert_close(out, ref_out, rtol=0, atol=0)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-12, atol=1e-12)
    layer.max_chunk_elements = 1  # one RoI per chunk
    chunked_out, chunked_grad = run(layer, feat, rois)
    assert torch.equal(chunked_out, out)
    torch.testing.assert_close(chunked_grad, grad, rtol=1e-12, atol=1e-12)


def test_bit_identical_under_deterministic_mode():
    """Repeated runs, also with 1 vs 2 threads, give the same bits in deterministic mode."""
    feat = torch.randn(2, 16, 24, 20, generator=torch.Generator().manual_seed(5))
    rois = make_rois((24, 20), 0.25, seed=7)
    previous = (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_num_threads())
    try:
        torch.use_deterministic_algorithms(True)
        for mode in ('avg', 'max'):
            layer = DeterministicRoIAlign(7, 0.25, 0, mode, True)
            first = run(layer, feat, rois)
            torch.set_num_threads(1 if previous[2] > 1 else 2)
            for out, grad in (run(layer, feat, rois), run(layer, feat, rois)):
                assert torch.equal(out, first[0]) and torch.equal(grad, first[1])
            torch.set_num_threads(previous[2])
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])
        torch.set_num_threads(previous[2])


def test_max_mode_quirks_match_mmcv():
    """'max' mode edge cases: a sample exactly at y == -1, values below mmcv's -10000."""
    feat = torch.randn(1, 2, 5, 6, generator=torch.Generator().manual_seed(2))
    feat[0, 1] -= 30000.0  # every sample of channel 1 is below mmcv's floor
    rois = torch.tensor([[0.0, 1.0, -1.5, 3.0, -0.5],  # one sample row at y == -1 exactly
                         [0.0, 0.5, 0.5, 4.5, 3.5]])
    args = (1, 1.0, 1, 'max', False)
    ref_out, ref_grad = run(mmcv_ops.RoIAlign(*args), feat, rois)
    out, grad = run(DeterministicRoIAlign(*args), feat, rois)
    assert ref_out[:, 1].eq(-10000.0).all() and ref_grad[0, 1].eq(0).all()
    assert ref_grad[0, 0].abs().sum() > 0
    torch.testing.assert_close(out, ref_out, rtol=0, atol=0)
    torch.testing.assert_close(grad, ref_grad, rtol=0, atol=0)


def test_empty_rois_and_use_torchvision():
    """No RoIs gives an empty, differentiable output; use_torchvision forces 'avg'."""
    feat = torch.randn(1, 2, 6, 6, requires_grad=True)
    out = DeterministicRoIAlign(3)(feat, feat.new_zeros((0, 5)))
    assert out.shape == (0, 2, 3, 3)
    out.sum().backward()
    assert torch.equal(feat.grad, torch.zeros_like(feat))
    rois = torch.tensor([[0.0, 0.5, 1.0, 4.0, 5.5]])
    tv = DeterministicRoIAlign(3, pool_mode='max', use_torchvision=True)(feat, rois)
    assert torch.equal(tv, DeterministicRoIAlign(3, pool_mode='avg')(feat, rois))


@pytest.mark.parametrize('kwargs,match', [
    (dict(output_size=7, pool_mode='median'),
     r"pool_mode='median' is not supported; use one of \('avg', 'max'\)"),
    (dict(output_size=(7, 0)), r'output_size=\(7, 0\) is not supported'),
])
def test_invalid_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DeterministicRoIAlign(**kwargs)


def test_invalid_inputs():
    feat = torch.randn(1, 2, 6, 6)
    with pytest.raises(ValueError, match=r'rois must be \(K, 5\)'):
        deterministic_roi_align(feat, torch.zeros(3, 4), 2)
    with pytest.raises(ValueError, match='every RoI needs x2 >= x1'):
        deterministic_roi_align(feat, torch.tensor([[0.0, 4, 1, 2, 5]]), 2, aligned=True)
    with pytest.raises(ValueError, match='non-finite'):
        deterministic_roi_align(feat, torch.tensor([[0.0, float('nan'), 1, 2, 5]]), 2)


def test_replace_roi_align():
    """Every mmcv RoIAlign (also one shared between two parents) is swapped in place."""
    shared = mmcv_ops.RoIAlign(2, 0.5, 2, 'max', False)
    model = nn.Module()
    model.layers = nn.ModuleList([mmcv_ops.RoIAlign(3, 0.25), nn.ReLU(), shared])
    model.head = nn.Sequential(shared)
    model.eval()
    feat = torch.randn(2, 3, 8, 8)
    rois = make_rois((8, 8), 0.25, seed=1)
    before = model.layers[0](feat, rois), model.layers[2](feat, rois)

    assert replace_roi_align(model) == ['layers.0', 'layers.2', 'head.0']
    assert isinstance(model.layers[0], DeterministicRoIAlign)
    assert model.layers[2] is model.head[0] and not model.layers[0].training
    assert repr(model.layers[2]) == repr(shared).replace('RoIAlign', 'DeterministicRoIAlign')
    assert torch.equal(model.layers[0](feat, rois), before[0])
    assert torch.equal(model.layers[2](feat, rois), before[1])
    assert replace_roi_align(model) == []
