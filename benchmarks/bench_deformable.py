"""Forward+backward time of mmrepro's deterministic ops vs the originals, side by side.

Usage (CUDA only; the Triton kernels run on CPU only through the slow interpreter)::

    python benchmarks/bench_deformable.py [--reps 21]

Each repetition runs the original and then the replacement on the same inputs, after
warm-ups; the table reports the median per case and the ratio ``deterministic /
original`` (the target: at most 1.5x). Shapes are those of R50 models at
1333x800: a DCN stage-4 layer, a Deformable DETR encoder layer (4 levels, 8 heads, 4
points), Mask2Former's point loss (12544 points per mask), RTMDet's channel attention.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from os import path as osp
from typing import Callable, List, Sequence, Tuple

import torch
import torch.nn.functional as F

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
from mmrepro.ops import adaptive_avg_pool2d, deformable  # noqa: E402

Case = Tuple[str, Callable, Callable, List[torch.Tensor]]


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.cuda().requires_grad_()


def make_cases() -> List[Case]:
    """(name, original, deterministic, inputs) for each op."""
    from mmcv.ops import deform_conv2d, modulated_deform_conv2d
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction
    g = torch.Generator().manual_seed(0)
    cases: List[Case] = []
    shapes = torch.tensor([[100, 168], [50, 84], [25, 42], [13, 21]], device='cuda')
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    keys = int(sizes.sum())
    msda = [_leaf(torch.randn(2, keys, 8, 32, generator=g)),
            _leaf(torch.rand(2, keys, 8, 4, 4, 2, generator=g)),
            _leaf(torch.rand(2, keys, 8, 4, 4, generator=g) / 16)]
    cases.append(('MSDeformAttn (DETR encoder)',
                  lambda v, p, w: MultiScaleDeformableAttnFunction.apply(v, shapes, starts, p,
                                                                         w, 64),
                  lambda v, p, w: deformable.ms_deform_attn(v, shapes, starts, p, w), msda))
    x = _leaf(torch.randn(2, 256, 50, 84, generator=g))
    weight = _leaf(torch.randn(256, 256, 3, 3, generator=g) * 0.02)
    offset = _leaf(torch.randn(2, 18, 50, 84, generator=g) * 2)
    mask = _leaf(torch.rand(2, 9, 50, 84, generator=g))
    bias = _leaf(torch.randn(256, generator=g))
    cases.append(('DeformConv2d 256ch 50x84', lambda *t: deform_conv2d(*t, 1, 1),
                  lambda *t: deformable.deform_conv2d(*t, 1, 1), [x, offset, weight]))
    cases.append(('ModulatedDeformConv2d 256ch 50x84',
                  lambda a, o, w, m, b: modulated_deform_conv2d(a, o, m, w, b, 1, 1),
                  lambda a, o, w, m, b: deformable.deform_conv2d(a, o, w, 1, 1, mask=m, bias=b),
                  [x, offset, weight, mask, bias]))
    masks = _leaf(torch.randn(2, 100, 200, 336, generator=g))
    points = _leaf(torch.rand(2, 12544, 1, 2, generator=g) * 2 - 1)
    cases.append(('grid_sample (Mask2Former points)',
                  lambda m, p: F.grid_sample(m, p, align_corners=False),
                  lambda m, p: deformable.grid_sample(m, p), [masks, points]))
    feat = _leaf(torch.randn(2, 384, 25, 42, generator=g))
    cases.append(('AdaptiveAvgPool2d(1) 384ch', lambda t: F.adaptive_avg_pool2d(t, 1),
                  lambda t: adaptive_avg_pool2d(t, 1), [feat]))
    return cases


def time_once(fn: Callable, inputs: Sequence[torch.Tensor]) -> float:
    """Seconds for one forward+backward (synchronised)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = fn(*inputs)
    torch.autograd.grad(out, inputs, torch.ones_like(out))
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--reps', type=int, default=21)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit('bench_deformable: needs a CUDA device (the CPU path of these ops is the '
                 'originals; the Triton kernels run on CPU only in the interpreter)')
    print(f'# {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA '
          f'{torch.version.cuda}, Python {platform.python_version()}; median of '
          f'{args.reps} forward+backward')
    print(f"{'case':36s} {'original ms':>12s} {'mmrepro ms':>11s} {'ratio':>6s}")
    for name, original, ours, inputs in make_cases():
        for _ in range(3):
            time_once(original, inputs), time_once(ours, inputs)
        times = {'orig': [], 'ours': []}
        for _ in range(args.reps):
            times['orig'].append(time_once(original, inputs))
            times['ours'].append(time_once(ours, inputs))
        a, b = (statistics.median(times[k]) * 1e3 for k in ('orig', 'ours'))
        print(f'{name:36s} {a:12.3f} {b:11.3f} {b / a:6.2f}')


if __name__ == '__main__':
    main()
