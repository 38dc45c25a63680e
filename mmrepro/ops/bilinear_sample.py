"""Bilinear sampling summed per output row, with a backward that has no atomics.

:func:`bilinear_sample` is the one primitive behind mmrepro's deterministic
deformable convolution, multi-scale deformable attention and ``grid_sample``
(:mod:`mmrepro.ops.deformable`). The layout of table, samples and outputs is described
by a :class:`SampleLayout` and in :mod:`mmrepro.ops.bilinear_kernels`.

- Forward: a gather; each output row adds its samples in a fixed order.
- Table gradient: a scatter in the original ops; here four entries per sample are
  sorted once by table row and summed as a gather (:mod:`mmrepro.ops.csr_kernels`).
- Gradients of the coordinates and of ``mult``: per sample, no accumulation across
  samples.

Every addition happens in an order fixed by the shapes, so the result is the same bits
on every run. Runs on CUDA tensors, and on CPU tensors under ``TRITON_INTERPRET=1``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .csr_kernels import acc_type, channel_block, compute_dtype, csr_rows, csr_sum
from .csr_kernels import kernels as csr_triton

__all__ = ['SampleLayout', 'bilinear_sample']

#: Output rows per program of the forward kernel.
ROWS_PER_PROGRAM = 16
#: Samples per program of the entries kernel.
ENTRIES_PER_PROGRAM = 256
#: Samples per program of the per-sample gradient kernel.
SAMPLES_PER_PROGRAM = 32
#: Most channels per program of the forward and per-sample gradient kernels. Read off
#: the ahead-of-time builds (``benchmarks/results/aot_builds.md``): at these blocks
#: both kernels stay at or under 128 registers without spills in float16/32 and
#: bfloat16; 128 and 64 took the float32 kernels to 146 and 192.
FORWARD_CHANNELS = 64
GRADS_CHANNELS = 32


@dataclass(frozen=True)
class SampleLayout:
    """Where each sample reads, and which output row it adds to.

    Attributes:
        group: ``K``, the samples added into one output row (consecutive samples).
        points: ``P``, samples per level inside a group: sample ``s`` lies on level
            ``(s % K) // P``.
        level_start: ``(L,)`` int32, pixel offset of each level's first pixel.
        level_h: ``(L,)`` int32 level heights.
        level_w: ``(L,)`` int32 level widths.
        row_base: ``(O,)`` int64, table row of pixel 0 of level 0 for each output row.
        stride: Table rows between horizontally adjacent pixels.
        num_rows: ``R``, the table's row count.
        inside: mmcv's rule: a point not strictly inside ``(-1, size)`` reads nothing.
    """

    group: int
    points: int
    level_start: Tensor
    level_h: Tensor
    level_w: Tensor
    row_base: Tensor
    stride: int
    num_rows: int
    inside: bool

    def __post_init__(self) -> None:
        # An expanded tensor can be flattened to a view of stride 0, which a kernel would
        # read past its end: keep contiguous copies, made once.
        for name in ('level_start', 'level_h', 'level_w', 'row_base'):
            object.__setattr__(self, name, getattr(self, name).contiguous())

    @property
    def num_out(self) -> int:
        """``O``, the number of output rows."""
        return self.row_base.numel()

    def tensors(self) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        """``row_base, level_start, level_h, level_w`` in kernel argument order."""
        return self.row_base, self.level_start, self.level_h, self.level_w

    def scalars(self) -> Tuple[int, int, int]:
        """``K, P, stride`` in kernel argument order."""
        return self.group, self.points, self.stride


def single_level(height: int, width: int, row_base: Tensor, stride: int, num_rows: int,
                 inside: bool) -> SampleLayout:
    """A :class:`SampleLayout` of one sample per output row on one map."""
    def ints(value: int) -> Tensor:  # a fill on the device: no host-to-device copy
        return torch.full((1,), value, dtype=torch.int32, device=row_base.device)
    return SampleLayout(1, 1, ints(0), ints(height), ints(width), row_base, stride,
                        num_rows, inside)


def kernels() -> ModuleType:
    """:mod:`mmrepro.ops.bilinear_kernels`, imported (with Triton) on first use."""
    return importlib.import_module('.bilinear_kernels', __package__)


def _cdiv(a: int, b: int) -> int:
    return csr_triton().triton.cdiv(a, b)


def _table_grad(grad_out: Tensor, ys: Tensor, xs: Tensor, mult: Optional[Tensor],
                layout: SampleLayout, dtype: torch.dtype) -> Tensor:
    """Gradient of the table: the scatter of ``grad_out`` done as a sorted gather."""
    total = ys.numel()
    if 4 * total >= 2**31 or layout.num_rows >= 2**31:
        raise ValueError(f'bilinear_sample: {total} samples over {layout.num_rows} table '
                         'rows exceed the int32 range of the deterministic backward; '
                         'split the batch.')
    k = kernels()
    keys = torch.empty(4 * total, dtype=torch.int32, device=ys.device)
    rows = torch.empty_like(keys)
    weights = torch.empty(4 * total, dtype=ys.dtype, device=ys.device)
    if total:
        grid = (_cdiv(total, ENTRIES_PER_PROGRAM),)
        k.entries_kernel[grid](ys, xs, ys if mult is None else mult, *layout.tensors(),
                               keys, rows, weights, total, *layout.scalars(),
                               HAS_MULT=mult is not None, INSIDE=layout.inside,
                               BLOCK=ENTRIES_PER_PROGRAM)
    order, row_ptr = csr_rows(keys, layout.num_rows)
    return csr_sum(grad_out, row_ptr, rows[order], weights[order], layout.num_rows, dtype)


class _BilinearSample(torch.autograd.Function):

    @staticmethod
    def forward(ctx, table: Tensor, ys: Tensor, xs: Tensor, mult: Optional[Tensor],
                layout: SampleLayout) -> Tensor:
        channels = table.size(1)
        out = table.new_empty((layout.num_out, channels))
        if out.numel():
            k = kernels()
            block_d = channel_block(channels, FORWARD_CHANNELS)
            grid = (_cdiv(layout.num_out, ROWS_PER_PROGRAM),
                    _cdiv(channels, block_d))
            k.forward_kernel[grid](table, ys, xs, ys if mult is None else mult,
                                   *layout.tensors(), out, layout.num_out, channels,
                                   *layout.scalars(), HAS_MULT=mult is not None,
                                   INSIDE=layout.inside, BLOCK_O=ROWS_PER_PROGRAM,
                                   BLOCK_D=block_d, ACC=acc_type(table.dtype))
        ctx.layout = layout
        ctx.save_for_backward(table, ys, xs, mult)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor) -> Tuple[Optional[Tensor], ...]:
        table, ys, xs, mult = ctx.saved_tensors
        layout: SampleLayout = ctx.layout
        grad_out = grad_out.contiguous()
        grad_table = grad_y = grad_x = grad_mult = None
        if ctx.needs_input_grad[0]:
            grad_table = _table_grad(grad_out, ys, xs, mult, layout, table.dtype)
        if any(ctx.needs_input_grad[1:4]):
            total = ys.numel()
            grad_y, grad_x = torch.empty_like(ys), torch.empty_like(xs)
            grad_mult = torch.empty_like(mult) if mult is not None else None
            if total:
                k = kernels()
                grid = (_cdiv(total, SAMPLES_PER_PROGRAM),)
                k.sample_grads_kernel[grid](
                    table, grad_out, ys, xs, ys if mult is None else mult, *layout.tensors(),
                    grad_y, grad_x, ys if grad_mult is None else grad_mult, total,
                    table.size(1), *layout.scalars(), HAS_MULT=mult is not None,
                    INSIDE=layout.inside, BLOCK_S=SAMPLES_PER_PROGRAM,
                    BLOCK_D=channel_block(table.size(1), GRADS_CHANNELS),
                    ACC=acc_type(table.dtype))
            elif grad_mult is not None:
                grad_mult.zero_()
        return grad_table, grad_y, grad_x, grad_mult, None


def bilinear_sample(table: Tensor, ys: Tensor, xs: Tensor, mult: Optional[Tensor],
                    layout: SampleLayout) -> Tensor:
    """``out[o] = sum over k < K of mult[s] * bilinear(table, ys[s], xs[s])``.

    Args:
        table: ``(R, D)`` rows read by the samples (float16/32/64, bfloat16).
        ys: ``(S,)`` row coordinates in pixels, ``S = O * K``.
        xs: ``(S,)`` column coordinates in pixels.
        mult: ``(S,)`` factor of each sample, or None for 1.
        layout: Where samples read and add (:class:`SampleLayout`).

    Returns:
        ``(O, D)`` in ``table``'s dtype, accumulated in float32 (float64 for float64).
        Differentiable in ``table``, ``ys``, ``xs`` and ``mult``.

    Raises:
        ValueError: If the sizes disagree with ``layout``.
    """
    if table.dim() != 2 or table.size(0) != layout.num_rows:
        raise ValueError(f'bilinear_sample: table has shape {tuple(table.shape)}; expected '
                         f'({layout.num_rows}, D) as the layout says.')
    total = layout.num_out * layout.group
    for name, t in (('ys', ys), ('xs', xs), ('mult', mult)):
        if t is not None and t.numel() != total:
            raise ValueError(f'bilinear_sample: {name} has {t.numel()} elements; expected '
                             f'{total} (output rows {layout.num_out} x group '
                             f'{layout.group}).')
    cdt = compute_dtype(table.dtype)

    def flat(t: Tensor) -> Tensor:
        return t.reshape(-1).to(cdt).contiguous()
    return _BilinearSample.apply(table.contiguous(), flat(ys), flat(xs),
                                 None if mult is None else flat(mult), layout)
