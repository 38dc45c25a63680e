"""A scatter-add done as a gather: entries sorted by target row, summed in that order.

Every backward pass that mmcv writes with ``atomicAdd`` (RoIAlign, deformable
convolution, multi-scale deformable attention, ``grid_sample``) adds
``weight * grad_output[row, c]`` into some rows of an input gradient. The order of
those additions, and so the float result, changes from run to run. Here the same sum
is fixed by construction:

1. The caller writes one entry ``(target key, source row, weight)`` per contribution;
   key -1 marks one that contributes nothing.
2. :func:`csr_rows` sorts the entries by key with a stable sort and takes CSR offsets;
   entries of one key keep the order the caller wrote them in.
3. :func:`csr_sum` runs one program per (target block, channel block) that adds each
   target's entries in that order, in float32 (float64 for float64 inputs).

No atomics, so the result is the same bits on every run. The kernel runs on CUDA, and
on CPU tensors under ``TRITON_INTERPRET=1`` (how the tests run it). Triton is
imported on first use, so that the variable is read then.
"""
from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Tuple

import torch
from torch import Tensor

__all__ = ['MIN_TRITON', 'acc_type', 'channel_block', 'compute_dtype', 'csr_rows', 'csr_sum',
           'kernels', 'triton_available', 'triton_status']

#: Targets per program of the sum kernel (a static loop inside the program).
PIXELS_PER_PROGRAM = 4


#: Oldest Triton whose language and interpreter mmrepro's kernels are written for
#: (tested with 3.7.1). torch < 2.4 pins Triton 2.x.
MIN_TRITON = (3, 0)


@functools.cache
def triton_status() -> Tuple[bool, str]:
    """Whether mmrepro's Triton kernels can run here, and if not, why (with versions).

    Cached: the deterministic ops' routers ask on every call.
    """
    try:
        import triton
    except ImportError:
        return False, (f'Triton is not installed (torch {torch.__version__}); mmrepro\'s '
                       f'kernels need triton >= {".".join(map(str, MIN_TRITON))}')
    version = getattr(triton, '__version__', '0')
    parts = tuple(int(p) for p in version.split('+')[0].split('.')[:2] if p.isdigit())
    if parts < MIN_TRITON:
        return False, (f'triton {version} (pinned by torch {torch.__version__}) is older '
                       f'than {".".join(map(str, MIN_TRITON))}, which mmrepro\'s kernels '
                       'need')
    return True, ''


def triton_available() -> bool:
    """Whether mmrepro's Triton kernels can run here (:func:`triton_status`)."""
    return triton_status()[0]


@functools.cache
def kernels() -> SimpleNamespace:
    """``triton``, ``triton.language`` and the sum kernel (Triton imported here)."""
    import triton
    import triton.language as tl

    @triton.jit(do_not_specialize=['num_pixels'])
    def csr_sum_kernel(grad_rows, row_ptr, entry_row, entry_weight, out, num_pixels,
                       channels, PIXELS: tl.constexpr, BLOCK_C: tl.constexpr,
                       ACC: tl.constexpr):
        c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
        c_live = c < channels
        for i in tl.static_range(PIXELS):
            p = tl.program_id(0) * PIXELS + i
            if p < num_pixels:
                begin = tl.load(row_ptr + p)
                end = tl.load(row_ptr + p + 1)
                acc = tl.zeros([BLOCK_C], dtype=ACC)
                for j in range(begin, end):
                    row = tl.load(entry_row + j).to(tl.int64)
                    w = tl.load(entry_weight + j)
                    g = tl.load(grad_rows + row * channels + c, mask=c_live, other=0.0)
                    acc += g.to(ACC) * w
                tl.store(out + p.to(tl.int64) * channels + c,
                         acc.to(out.dtype.element_ty), mask=c_live)

    return SimpleNamespace(triton=triton, tl=tl, csr_sum=csr_sum_kernel)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Accumulation (and coordinate) dtype: float64 for float64 inputs, else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def acc_type(dtype: torch.dtype) -> object:
    """Triton accumulation type of :func:`compute_dtype` for inputs of ``dtype``."""
    tl = kernels().tl
    return tl.float64 if dtype == torch.float64 else tl.float32


def channel_block(channels: int, cap: int) -> int:
    """Channels per program: the next power of two of ``channels``, at most ``cap``."""
    return min(cap, kernels().triton.next_power_of_2(max(channels, 1)))


def csr_rows(keys: Tensor, num_pixels: int) -> Tuple[Tensor, Tensor]:
    """Stable order of the entries by key, and the CSR offsets of every key.

    Entries with key -1 (no contribution) sort first and lie before ``row_ptr[0]``.

    Returns:
        ``(order, row_ptr)``: ``order`` (int64) permutes the entries so that keys
        ascend and entries of one key keep their order; ``row_ptr`` (``num_pixels +
        1``, int64) bounds each key's entries in that order.
    """
    sorted_keys, order = torch.sort(keys, stable=True)
    pixels = torch.arange(num_pixels + 1, dtype=keys.dtype, device=keys.device)
    return order, torch.searchsorted(sorted_keys, pixels)


def csr_sum(grad_rows: Tensor, row_ptr: Tensor, rows: Tensor, weights: Tensor,
            num_pixels: int, out_dtype: torch.dtype) -> Tensor:
    """``out[p, c] = sum of weights[j] * grad_rows[rows[j], c]`` over key ``p``'s entries.

    Args:
        grad_rows: ``(R, C)`` contiguous source rows (an output gradient).
        row_ptr: CSR offsets from :func:`csr_rows`.
        rows: Entry source rows, already in CSR order.
        weights: Entry weights, already in CSR order.
        num_pixels: Number of target rows.
        out_dtype: dtype of the result.

    Returns:
        ``(num_pixels, C)`` sums, channels last.
    """
    channels = grad_rows.size(1)
    out = torch.empty((num_pixels, channels), dtype=out_dtype, device=grad_rows.device)
    if num_pixels == 0 or channels == 0:
        return out
    k = kernels()
    block_c = channel_block(channels, 256)
    grid = (k.triton.cdiv(num_pixels, PIXELS_PER_PROGRAM), k.triton.cdiv(channels, block_c))
    k.csr_sum[grid](grad_rows, row_ptr, rows, weights, out, num_pixels, channels,
                    PIXELS=PIXELS_PER_PROGRAM, BLOCK_C=block_c, ACC=acc_type(weights.dtype))
    return out
