"""Every Triton kernel variant mmrepro's ops launch, captured from real launches.

A variant is what Triton compiles once: the kernel, its argument types, its
``constexpr`` values and the specialisation Triton computes from the arguments
(16-byte alignment of pointers, divisibility of integers). :func:`capture_variants`
runs mmrepro's ops (forward and backward) under Triton's interpreter
(``TRITON_INTERPRET=1``) over the dtypes, sampling modes and channel counts
that MMDetection's models use, records every launch, and computes each launch's
specialisation as a CUDA launch would (Triton's own binder, for a CUDA target).
:mod:`mmrepro.ops.aot.build` then builds the variants for real GPUs.

Run as ``TRITON_INTERPRET=1 python -m mmrepro.ops.aot.capture OUT.json``.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterator, List, Sequence, Set, Tuple

import torch

__all__ = ['CHANNELS', 'DTYPES', 'Variant', 'capture_variants', 'jit_functions', 'load_variants',
           'save_variants', 'uncovered']

#: Input dtypes of the ops (bfloat16 included: autocast on Ampere and later).
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
#: Channel counts of MMDetection's models: 1 (``point_sample`` on mask logits), 32
#: (a multi-scale deformable attention head of 256 channels / 8 heads) and 256 (FPN,
#: RoI heads, deformable convolution in ResNet stages; 64-512 give the same channel
#: blocks except in the CSR sum), and 24, which is not a multiple of 16 (specialised
#: differently).
CHANNELS = (1, 24, 32, 256)


@dataclass(frozen=True)
class Variant:
    """One compilation unit: a kernel and what a launch specialises it on.

    Attributes:
        kernel: ``module:qualname`` of the kernel's Python function.
        signature: Argument name -> Triton type (``'*fp32'``, ``'i32'``, ``'constexpr'``).
        constexprs: Argument index -> value; a Triton dtype as ``'tl.<name>'``.
        attrs: Argument index -> Triton attributes (e.g. ``[['tt.divisibility', 16]]``).
        num_warps: Launch option (Triton's default unless the launcher sets one).
    """

    kernel: str
    signature: Tuple[Tuple[str, str], ...]
    constexprs: Tuple[Tuple[int, Any], ...]
    attrs: Tuple[Tuple[int, Any], ...]
    num_warps: int

    @property
    def name(self) -> str:
        """``module.function`` of the kernel (e.g. ``csr_kernels.csr_sum_kernel``)."""
        module, qualname = self.kernel.split(':')
        return f"{module.rsplit('.', 1)[-1]}.{qualname.rsplit('.', 1)[-1]}"

    @property
    def label(self) -> str:
        """The variant in a few words: pointer dtypes, constexprs, aligned integers."""
        names = [n for n, _ in self.signature]
        dtypes = sorted({t[1:] for _, t in self.signature if t.startswith('*')})
        consts = ', '.join(f'{names[i]}={_short(v)}' for i, v in self.constexprs)
        divisible = [names[i] for i, a in self.attrs
                     if a and not self.signature[i][1].startswith('*')]
        return (f"{'/'.join(dtypes)} {consts}"
                + (f" ({','.join(divisible)} %16)" if divisible else ''))


_TL_DTYPES = ('float16', 'bfloat16', 'float32', 'float64', 'int32', 'int64')


def _short(value: Any) -> str:
    return value.replace('tl.', '') if isinstance(value, str) else str(value)


def _plain(value: Any) -> Any:
    """A constexpr value as JSON can hold it (a Triton dtype as ``'tl.<name>'``)."""
    import triton.language as tl
    if isinstance(value, tl.dtype):
        return next(f'tl.{n}' for n in _TL_DTYPES if getattr(tl, n) == value)
    if isinstance(value, tl.constexpr):
        return _plain(value.value)
    return value


def _to_variant(jit_kwargs: Dict[str, Any], fn: Any, args: Sequence[Any],
                kwargs: Dict[str, Any]) -> Variant:
    """The variant a CUDA launch of ``fn(*args, **kwargs)`` compiles (Triton's binder)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature
    jit = JITFunction(fn, **{k: v for k, v in jit_kwargs.items()
                             if k in ('do_not_specialize', 'do_not_specialize_on_alignment')})
    backend = make_backend(GPUTarget('cuda', 90, 32))
    binder = create_function_from_signature(jit.signature, jit.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = jit._pack_args(backend, kwargs, bound,
                                                           specialization, options)
    return Variant(
        kernel=f'{fn.__module__}:{fn.__qualname__}',
        signature=tuple(signature.items()),
        constexprs=tuple(sorted((k[0], _plain(v)) for k, v in constexprs.items())),
        attrs=tuple(sorted((k[0], tuple(tuple(a) for a in v)) for k, v in attrs.items())),
        num_warps=options.num_warps)


@contextlib.contextmanager
def _recording(found: List[Variant]) -> Iterator[None]:
    """Record the variant of every launch of an interpreted kernel, then run it."""
    from triton.runtime.interpreter import InterpretedFunction
    original = InterpretedFunction.run

    def run(self, *args, grid, warmup, **kwargs):
        found.append(_to_variant(self.kwargs, self.fn, args, kwargs))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)
    InterpretedFunction.run = run
    try:
        yield
    finally:
        InterpretedFunction.run = original


def _exercise_bilinear(dtype: torch.dtype, channels: int) -> None:
    """``bilinear_sample`` forward and backward in every sampling mode."""
    from ..bilinear_sample import SampleLayout, bilinear_sample
    ints = lambda *v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    gen = torch.Generator().manual_seed(0)
    for has_mult in (False, True):
        for inside in (False, True):
            # Two levels (4x4, 2x2), two points each; 3 output rows.
            layout = SampleLayout(4, 2, ints(0, 16), ints(4, 2), ints(4, 2),
                                  torch.tensor([0, 20, 40], dtype=torch.int64), 1, 60, inside)
            table = torch.randn(60, channels, generator=gen).to(dtype).requires_grad_()
            ys = (torch.rand(12, generator=gen) * 5 - 1).requires_grad_()
            xs = (torch.rand(12, generator=gen) * 5 - 1).requires_grad_()
            mult = torch.rand(12, generator=gen).requires_grad_() if has_mult else None
            bilinear_sample(table, ys, xs, mult, layout).float().sum().backward()


def _exercise_roi_align(dtype: torch.dtype, channels: int) -> None:
    """The CUDA path of RoIAlign (``avg``): forward and the Triton backward."""
    from ..roi_align.cuda import TritonRoIAlignFunction
    gen = torch.Generator().manual_seed(0)
    feat = torch.randn(2, channels, 8, 8, generator=gen).to(dtype).requires_grad_()
    rois = torch.tensor([[0, 1.0, 1.0, 6.0, 5.0], [1, 0.5, 2.0, 7.5, 7.0]], dtype=dtype)
    for sampling_ratio in (0, 2):
        out = TritonRoIAlignFunction.apply(feat, rois, 7, 7, 1.0, sampling_ratio, True,
                                           1 << 20)
        out.float().sum().backward()


def _exercise_rotated(dtype: torch.dtype) -> None:
    """The rotated ops' backward passes (their forward is mmcv's kernel; mmcv's rotated
    kernels take no bfloat16, so neither do mmrepro's).

    Their entries kernels do not depend on the channels, and their CSR sums are
    RoIAlign's (the same dtypes; float32 rows for RiRoIAlign's fp16 mix), whose
    variants :func:`_exercise_roi_align` captures at every channel count: one count
    (an FPN's 256, 8 orientations) captures the rest.
    """
    if dtype == torch.bfloat16:
        return
    from ..rotated import kernels
    gen = torch.Generator().manual_seed(0)
    channels, orientations = 256, 8
    shape = torch.Size((2, channels, 5, 6))
    rois = torch.tensor([[0, 3.0, 2.5, 4.0, 3.0, 0.5], [1, 2.0, 3.0, 5.0, 2.0, -2.0]],
                        dtype=dtype)
    grad = torch.randn(2, channels, 2, 2, generator=gen).to(dtype)
    kernels.roi_align_rotated_backward(grad, rois, 1.0, 0, True, False, shape)
    kernels.riroi_align_rotated_backward(grad, rois, 1.0, 2, orientations, True, shape)
    boxes = (torch.rand(2, 5, 6, 5, generator=gen) * 6 - 1).to(dtype)
    for points in (1, 5):
        kernels.rotated_feature_align_backward(torch.randn(shape, generator=gen).to(dtype),
                                               boxes, 1.0, points)


def capture_variants(dtypes: Sequence[torch.dtype] = DTYPES,
                     channels: Sequence[int] = CHANNELS) -> List[Variant]:
    """Run the ops under the interpreter and return every distinct variant launched.

    Raises:
        RuntimeError: If Triton's interpreter is not on (``TRITON_INTERPRET=1`` must be
            set before Triton is imported).
    """
    from triton.runtime.interpreter import InterpretedFunction

    from .. import bilinear_kernels
    if not isinstance(bilinear_kernels.forward_kernel, InterpretedFunction):
        raise RuntimeError('aot_capture: TRITON_INTERPRET=1 must be set before Triton is '
                           'imported; run `TRITON_INTERPRET=1 python -m '
                           'mmrepro.ops.aot.capture OUT.json`.')
    found: List[Variant] = []
    with _recording(found):
        for dtype in dtypes:
            for c in channels:
                _exercise_bilinear(dtype, c)
                _exercise_roi_align(dtype, c)
            _exercise_rotated(dtype)
    return list(dict.fromkeys(found))


def _is_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == 'jit' or \
        isinstance(target, ast.Name) and target.id == 'jit'


def jit_functions(source: str) -> Dict[str, Set[str]]:
    """Every ``@triton.jit`` function in ``source`` -> the jit functions it calls."""
    found = {node: set() for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.FunctionDef) and any(map(_is_jit, node.decorator_list))}
    names = {node.name for node in found}
    for node, calls in found.items():
        calls.update(c.func.id for c in ast.walk(node) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Name) and c.func.id in names)
    return {node.name: calls for node, calls in found.items()}


def uncovered(sources: Dict[str, str], variants: Sequence[Variant]) -> List[str]:
    """Jit functions neither launched in ``variants`` nor called by a launched one.

    Args:
        sources: Module name (``'csr_kernels'``) -> its source.
        variants: What :func:`capture_variants` recorded.

    Returns:
        ``module.function`` of each kernel that no build covers, sorted.
    """
    launched = {v.name for v in variants}
    covered = set(launched)
    for module, source in sources.items():
        graph = jit_functions(source)
        todo = [f for f in graph if f'{module}.{f}' in launched]
        while todo:
            for callee in graph[todo.pop()]:
                if f'{module}.{callee}' not in covered:
                    covered.add(f'{module}.{callee}')
                    todo.append(callee)
    return sorted(f'{m}.{f}' for m, s in sources.items() for f in jit_functions(s)
                  if f'{m}.{f}' not in covered)


def save_variants(variants: Sequence[Variant], path: str) -> None:
    """Write variants as JSON."""
    with open(path, 'w') as f:
        json.dump([asdict(v) for v in variants], f, indent=0)


def load_variants(path: str) -> List[Variant]:
    """Read variants written by :func:`save_variants`."""
    def tuples(pairs: Any) -> Tuple[Tuple[Any, Any], ...]:
        return tuple((k, v) for k, v in pairs)
    with open(path) as f:
        return [Variant(d['kernel'], tuples(d['signature']), tuples(d['constexprs']),
                        tuple((i, tuple(tuple(a) for a in v)) for i, v in d['attrs']),
                        d['num_warps']) for d in json.load(f)]


def main(argv: Sequence[str] = tuple(sys.argv[1:])) -> int:
    """``python -m mmrepro.ops.aot.capture OUT.json`` (sets ``TRITON_INTERPRET=1``)."""
    if len(argv) != 1:
        print('usage: python -m mmrepro.ops.aot.capture OUT.json', file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    variants = capture_variants()
    save_variants(variants, argv[0])
    print(f'aot_capture: {len(variants)} variants of '
          f'{len({v.kernel for v in variants})} kernels -> {argv[0]}')
    return 0


if __name__ == '__main__':
    os.environ.setdefault('TRITON_INTERPRET', '1')
    sys.exit(main())
