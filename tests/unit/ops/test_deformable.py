"""Deterministic deform conv, MSDA and grid_sample against the originals, on CPU.

``tests/conftest.py`` sets ``TRITON_INTERPRET=1`` where no GPU is visible, so the
Triton kernels that run on CUDA run here on CPU tensors. References: mmcv's CPU
kernels (``deform_conv2d``, ``modulated_deform_conv2d``), ``F.grid_sample``, and
mmcv's PyTorch multi-scale deformable attention (mmcv has no CPU kernel for it) in
float64.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support.repro_utils import skip_unless_triton_kernels_run

from mmrepro.ops import deformable

skip_unless_triton_kernels_run()
mmcv_ops = pytest.importorskip('mmcv.ops', reason='mmcv with compiled ops is not installed')
msda_pytorch = mmcv_ops.multi_scale_deform_attn.multi_scale_deformable_attn_pytorch

DEVICE = 'cuda' if torch.cuda.is_available() else 'cpu'
#: float64 agrees to rounding; float32 within its own rounding.
TOL = {torch.float64: 1e-12, torch.float32: 1e-4}


def _grads(out: torch.Tensor, inputs: tuple, seed: int = 1) -> tuple:
    weight = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed),
                         dtype=out.dtype).to(out.device)
    return torch.autograd.grad((out * weight).sum(), inputs)


def _assert_close(ours: tuple, theirs: tuple, dtype: torch.dtype) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert float(b.detach().abs().max()) > 0  # a real comparison, not zeros against zeros
        torch.testing.assert_close(a, b, rtol=TOL[dtype], atol=TOL[dtype])


def _leaf(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.to(DEVICE, dtype).requires_grad_()


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('align_corners', [False, True])
def test_grid_sample_matches_torch(dtype, align_corners):
    g = torch.Generator().manual_seed(0)
    x = _leaf(torch.randn(2, 5, 6, 7, generator=g), dtype)
    # Points inside, outside and on the border of the map.
    grid = _leaf(torch.rand(2, 4, 3, 2, generator=g) * 2.6 - 1.3, dtype)
    ours = deformable.grid_sample(x, grid, align_corners)
    theirs = F.grid_sample(x, grid, align_corners=align_corners)
    _assert_close((ours, *_grads(ours, (x, grid))), (theirs, *_grads(theirs, (x, grid))),
                  dtype)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('deform_groups,groups,modulated',
                         [(1, 1, False), (2, 1, False), (2, 2, True), (1, 1, True)])
def test_deform_conv2d_matches_mmcv(dtype, deform_groups, groups, modulated):
    g = torch.Generator().manual_seed(deform_groups * 10 + groups + modulated)
    x = _leaf(torch.randn(2, 4, 7, 6, generator=g), dtype)
    weight = _leaf(torch.randn(6, 4 // groups, 3, 3, generator=g), dtype)
    offset = torch.randn(2, deform_groups * 18, 4, 3, generator=g) * 1.5
    offset[0, :, 0, 0] = 0.0  # integer points on the padding border: mmcv reads nothing
    offset = _leaf(offset, dtype)
    args = (2, 1, 1, groups, deform_groups)
    if modulated:
        mask = _leaf(torch.rand(2, deform_groups * 9, 4, 3, generator=g), dtype)
        bias = _leaf(torch.randn(6, generator=g), dtype)
        inputs = (x, offset, weight, mask, bias)
        ours = deformable.deform_conv2d(x, offset, weight, *args, mask=mask, bias=bias)
        theirs = mmcv_ops.modulated_deform_conv2d(x, offset, mask, weight, bias, *args)
    else:
        inputs = (x, offset, weight)
        ours = deformable.deform_conv2d(x, offset, weight, *args)
        theirs = mmcv_ops.deform_conv2d(x, offset, weight, *args, False, 32)
    _assert_close((ours, *_grads(ours, inputs)), (theirs, *_grads(theirs, inputs)), dtype)


def _msda_inputs(dtype: torch.dtype) -> tuple:
    g = torch.Generator().manual_seed(3)
    shapes = torch.tensor([[5, 6], [3, 2], [1, 1]])
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    bs, heads, dims, points, queries = 2, 2, 4, 3, 5
    value = _leaf(torch.randn(bs, int(sizes.sum()), heads, dims, generator=g), dtype)
    loc = _leaf(torch.rand(bs, queries, heads, 3, points, 2, generator=g) * 1.4 - 0.2, dtype)
    weights = _leaf(torch.rand(bs, queries, heads, 3, points, generator=g), dtype)
    return value, shapes.to(DEVICE), starts.to(DEVICE), loc, weights


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_ms_deform_attn_matches_mmcv_pytorch_version(dtype):
    value, shapes, starts, loc, weights = _msda_inputs(dtype)
    ours = deformable.ms_deform_attn(value, shapes, starts, loc, weights)
    theirs = msda_pytorch(value, shapes, loc, weights)
    inputs = (value, loc, weights)
    _assert_close((ours, *_grads(ours, inputs)), (theirs, *_grads(theirs, inputs)), dtype)


def test_backward_is_bitwise_repeatable():
    value, shapes, starts, loc, weights = _msda_inputs(torch.float32)
    runs = []
    for _ in range(2):
        out = deformable.ms_deform_attn(value, shapes, starts, loc, weights)
        runs.append([g.cpu().numpy().tobytes() for g in _grads(out, (value, loc, weights))])
    assert runs[0] == runs[1]


def test_bad_shapes_are_named():
    x = torch.zeros(2, 4, 5, 5)
    with pytest.raises(ValueError, match=r'grid_sample: grid has shape \(2, 3, 2\); expected '
                                         r'\(2, Ho, Wo, 2\) for an input of shape '
                                         r'\(2, 4, 5, 5\)\.'):
        deformable.grid_sample(x, torch.zeros(2, 3, 2))
    with pytest.raises(ValueError, match=r'deform_conv2d: offset has shape \(2, 18, 5, 5\); '
                                         r'expected \(2, 18, 3, 3\)\.'):
        deformable.deform_conv2d(x, torch.zeros(2, 18, 5, 5), torch.zeros(3, 4, 3, 3))
    with pytest.raises(ValueError, match=r'deform_conv2d: 4 input and 3 output channels must '
                                         r'divide by deform_groups=3 and groups=1\.'):
        deformable.deform_conv2d(x, torch.zeros(2, 54, 3, 3), torch.zeros(3, 4, 3, 3),
                                 deform_groups=3)


def test_single_image_batch_reads_inside_its_table():
    # One image and one deformable group: the per-row table offsets are an expanded
    # scalar, which must not reach the kernel as a stride-0 view.
    g = torch.Generator().manual_seed(5)
    x = _leaf(torch.randn(1, 4, 5, 6, generator=g), torch.float64)
    offset = _leaf(torch.randn(1, 18, 5, 6, generator=g) * 2, torch.float64)
    weight = _leaf(torch.randn(3, 4, 3, 3, generator=g), torch.float64)
    ours = deformable.deform_conv2d(x, offset, weight, 1, 1)
    theirs = mmcv_ops.deform_conv2d(x, offset, weight, 1, 1)
    inputs = (x, offset, weight)
    _assert_close((ours, *_grads(ours, inputs)), (theirs, *_grads(theirs, inputs)),
                  torch.float64)
