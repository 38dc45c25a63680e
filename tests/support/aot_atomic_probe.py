"""Test-only Triton kernels the ahead-of-time tier must flag (an atomic, a division)."""
import triton
import triton.language as tl


@triton.jit
def atomic_probe_kernel(x, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(x + i % 4, 1.0, mask=i < n)


@triton.jit
def divide_probe_kernel(x, y, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + i, tl.load(x + i) / tl.load(y + i))
