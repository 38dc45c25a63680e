"""Deterministic deformable convolution, multi-scale deformable attention, grid_sample.

Each op is :func:`~mmrepro.ops.bilinear_sample.bilinear_sample` over a table view of
its input, so all three share one backward without atomics:

- :func:`deform_conv2d` (mmcv's ``deform_conv2d`` and, with ``mask``,
  ``modulated_deform_conv2d``): the im2col columns are bilinear samples, one per
  (pixel, deformable group, kernel tap); the convolution is then a matrix product.
- :func:`ms_deform_attn` (mmcv's ``MultiScaleDeformableAttnFunction``): each (query,
  head) output row sums its levels x points samples, weighted by attention.
- :func:`grid_sample` (``F.grid_sample``, bilinear, zero padding): one sample per
  output pixel.

They match the originals within float rounding (the tests compare them), and run on
CUDA, or on CPU tensors under ``TRITON_INTERPRET=1``.
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.nn.modules.utils import _pair

from .bilinear_sample import SampleLayout, bilinear_sample, single_level

__all__ = ['deform_conv2d', 'grid_sample', 'ms_deform_attn']

IntPair = Union[int, Sequence[int]]


def _arange(n: int, like: Tensor) -> Tensor:
    return torch.arange(n, device=like.device, dtype=torch.int64)


def grid_sample(input: Tensor, grid: Tensor, align_corners: bool = False) -> Tensor:
    """``F.grid_sample(input, grid, 'bilinear', 'zeros', align_corners)``, deterministic.

    Args:
        input: ``(N, C, H, W)``.
        grid: ``(N, Ho, Wo, 2)`` normalised ``(x, y)`` in ``[-1, 1]``.
        align_corners: As in ``F.grid_sample``.

    Returns:
        ``(N, C, Ho, Wo)``.
    """
    n, channels, height, width = input.shape
    if grid.dim() != 4 or grid.size(0) != n or grid.size(3) != 2:
        raise ValueError(f'grid_sample: grid has shape {tuple(grid.shape)}; expected '
                         f'({n}, Ho, Wo, 2) for an input of shape {tuple(input.shape)}.')
    out_h, out_w = grid.shape[1:3]

    def unnormalize(coord: Tensor, size: int) -> Tensor:
        if align_corners:
            return (coord + 1) / 2 * (size - 1)
        return ((coord + 1) * size - 1) / 2
    table = input.permute(0, 2, 3, 1).reshape(n * height * width, channels)
    row_base = (_arange(n, input) * (height * width)).repeat_interleave(out_h * out_w)
    layout = single_level(height, width, row_base, 1, n * height * width, inside=False)
    grid = grid.float() if grid.dtype != torch.float64 else grid
    out = bilinear_sample(table, unnormalize(grid[..., 1], height),
                          unnormalize(grid[..., 0], width), None, layout)
    return out.view(n, out_h, out_w, channels).permute(0, 3, 1, 2).contiguous()


def ms_deform_attn(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                   sampling_locations: Tensor, attention_weights: Tensor,
                   grid_sample_rule: bool = False) -> Tensor:
    """Multi-scale deformable attention (mmcv's CUDA op), deterministic.

    Args:
        value: ``(bs, num_keys, num_heads, D)``.
        spatial_shapes: ``(L, 2)`` ``(h, w)`` of each level.
        level_start_index: ``(L,)`` first key of each level.
        sampling_locations: ``(bs, num_queries, num_heads, L, P, 2)`` normalised
            ``(x, y)``.
        attention_weights: ``(bs, num_queries, num_heads, L, P)``.
        grid_sample_rule: Compute pixel coordinates and borders as mmcv's PyTorch
            version does through ``F.grid_sample``, instead of as its CUDA kernel
            does (``loc * size - 0.5``; a point not strictly inside ``(-1, size)``
            reads nothing). The results differ only at integer coordinates, where
            the coordinate gradient has a kink: a different rounding of the same
            point can pick the other side.

    Returns:
        ``(bs, num_queries, num_heads * D)``.
    """
    bs, num_keys, heads, channels = value.shape
    _, queries, _, levels, points, _ = sampling_locations.shape
    shapes = spatial_shapes.to(sampling_locations.device)
    level_h = shapes[:, 0].view(1, 1, 1, levels, 1)
    level_w = shapes[:, 1].view(1, 1, 1, levels, 1)
    if grid_sample_rule:  # grid = 2 * loc - 1, then grid_sample's unnormalisation
        grids = sampling_locations * 2 - 1
        ys = ((grids[..., 1] + 1) * level_h - 1) / 2
        xs = ((grids[..., 0] + 1) * level_w - 1) / 2
    else:  # mmcv's kernel: h_im = loc_h * spatial_h - 0.5 (and the same for w)
        ys = sampling_locations[..., 1] * level_h - 0.5
        xs = sampling_locations[..., 0] * level_w - 0.5
    row_base = (_arange(bs, value) * (num_keys * heads)).view(bs, 1, 1) + \
        _arange(heads, value).view(1, 1, heads)
    layout = SampleLayout(
        group=levels * points, points=points,
        level_start=level_start_index.to(device=value.device, dtype=torch.int32),
        level_h=shapes[:, 0].to(torch.int32).contiguous(),
        level_w=shapes[:, 1].to(torch.int32).contiguous(),
        row_base=row_base.expand(bs, queries, heads).reshape(-1), stride=heads,
        num_rows=bs * num_keys * heads, inside=not grid_sample_rule)
    out = bilinear_sample(value.reshape(bs * num_keys * heads, channels), ys, xs,
                          attention_weights, layout)
    return out.view(bs, queries, heads * channels)


def _conv_geometry(shape: torch.Size, kernel: Tuple[int, int], stride: Tuple[int, int],
                   padding: Tuple[int, int], dilation: Tuple[int, int]) -> Tuple[int, int]:
    out = [(shape[2 + i] + 2 * padding[i] - (dilation[i] * (kernel[i] - 1) + 1)) // stride[i]
           + 1 for i in range(2)]
    return out[0], out[1]


def deform_conv2d(input: Tensor, offset: Tensor, weight: Tensor, stride: IntPair = 1,
                  padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1,
                  deform_groups: int = 1, mask: Optional[Tensor] = None,
                  bias: Optional[Tensor] = None) -> Tensor:
    """mmcv's (modulated) deformable convolution, deterministic.

    Args:
        input: ``(N, C, H, W)``.
        offset: ``(N, deform_groups * 2 * kh * kw, Ho, Wo)``, ``(dy, dx)`` per tap.
        weight: ``(C_out, C / groups, kh, kw)``.
        stride: As in ``nn.Conv2d``.
        padding: As in ``nn.Conv2d``.
        dilation: As in ``nn.Conv2d``.
        groups: Convolution groups.
        deform_groups: Channel groups with their own offsets.
        mask: ``(N, deform_groups * kh * kw, Ho, Wo)`` modulation (DCNv2), or None.
        bias: ``(C_out,)`` or None.

    Returns:
        ``(N, C_out, Ho, Wo)``.
    """
    stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    input = input.type_as(offset)
    n, channels, height, width = input.shape
    c_out, _, kh, kw = weight.shape
    taps = kh * kw
    out_h, out_w = _conv_geometry(input.shape, (kh, kw), stride, padding, dilation)
    if channels % deform_groups or channels % groups or c_out % groups:
        raise ValueError(f'deform_conv2d: {channels} input and {c_out} output channels '
                         f'must divide by deform_groups={deform_groups} and '
                         f'groups={groups}.')
    expected = (n, deform_groups * 2 * taps, out_h, out_w)
    if tuple(offset.shape) != expected:
        raise ValueError(f'deform_conv2d: offset has shape {tuple(offset.shape)}; '
                         f'expected {expected}.')
    per_group = channels // deform_groups
    table = input.view(n, deform_groups, per_group, height, width).permute(0, 3, 4, 1, 2)
    # Samples in (n, ho, wo, deformable group, tap) order, one per output row.
    shifts = offset.view(n, deform_groups, taps, 2, out_h, out_w).permute(0, 4, 5, 1, 2, 3)
    tap = _arange(taps, input)
    base_y = (_arange(out_h, input) * stride[0] - padding[0]).view(out_h, 1, 1, 1) + \
        (tap // kw * dilation[0]).view(1, 1, 1, taps)
    base_x = (_arange(out_w, input) * stride[1] - padding[1]).view(1, out_w, 1, 1) + \
        (tap % kw * dilation[1]).view(1, 1, 1, taps)
    ys = base_y.to(shifts.dtype) + shifts[..., 0]
    xs = base_x.to(shifts.dtype) + shifts[..., 1]
    mult = None
    if mask is not None:
        mult = mask.view(n, deform_groups, taps, out_h, out_w).permute(0, 3, 4, 1, 2)
    row_base = (_arange(n, input) * (height * width * deform_groups)).view(n, 1, 1, 1, 1) + \
        _arange(deform_groups, input).view(1, 1, 1, deform_groups, 1)
    layout = single_level(
        height, width, row_base.expand(n, out_h, out_w, deform_groups, taps).reshape(-1),
        deform_groups, n * height * width * deform_groups, inside=True)
    columns = bilinear_sample(table.reshape(-1, per_group), ys, xs, mult, layout)
    pixels = n * out_h * out_w
    weight = weight.type_as(input)
    if groups == 1:
        # Columns are (group, tap, channel); order the weight the same way.
        w = weight.view(c_out, deform_groups, per_group, taps).permute(0, 1, 3, 2)
        out = columns.view(pixels, channels * taps) @ w.reshape(c_out, channels * taps).t()
    else:
        cols = columns.view(pixels, deform_groups, taps, per_group).permute(1, 3, 2, 0)
        cols = cols.reshape(groups, channels // groups * taps, pixels)
        w = weight.reshape(groups, c_out // groups, channels // groups * taps)
        out = torch.bmm(w, cols).reshape(c_out, pixels).t()
    out = out.view(n, out_h, out_w, c_out).permute(0, 3, 1, 2)
    if bias is not None:
        out = out + bias.type_as(out).view(1, c_out, 1, 1)
    return out.contiguous()
