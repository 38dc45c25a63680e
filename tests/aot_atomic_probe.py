"""Test-only Triton kernel with an atomic add: the ahead-of-time tier must flag it."""
import triton
import triton.language as tl


@triton.jit
def atomic_probe_kernel(x, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(x + i % 4, 1.0, mask=i < n)
