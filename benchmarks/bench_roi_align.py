"""Forward+backward time of DeterministicRoIAlign vs mmcv.ops.RoIAlign, side by side.

Usage::

    python benchmarks/bench_roi_align.py [--device cpu] [--threads 1] [--reps 7]

Each repetition runs mmcv and then the replacement on the same inputs (so load spikes
hit both), after one warm-up each; the table reports the median per case, the ratio
``deterministic / mmcv`` and whether the forward outputs are bit-identical. mmcv's CPU
kernel is single-threaded, hence the default of one intra-op thread.
"""
from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from os import path as osp
from typing import Callable, Dict, List, Sequence, Tuple

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
from mmrepro.ops import DeterministicRoIAlign  # noqa: E402

Case = Tuple[str, List[torch.Tensor], List[torch.Tensor], Dict]


def random_rois(num: int, img_size: int, batch: int, gen: torch.Generator) -> torch.Tensor:
    """``num`` boxes with log-uniform sides of 16..img_size/2 px, some crossing the border."""
    log_lo, log_hi = math.log(16), math.log(img_size / 2)
    wh = torch.exp(log_lo + torch.rand(num, 2, generator=gen) * (log_hi - log_lo))
    xy = torch.rand(num, 2, generator=gen) * img_size - wh / 4
    idx = torch.randint(0, batch, (num, 1), generator=gen).float()
    return torch.cat([idx, xy, xy + wh], dim=1)


def fpn_levels(rois: torch.Tensor, num_levels: int = 4, finest_scale: int = 56) -> torch.Tensor:
    """mmdet SingleRoIExtractor.map_roi_levels: level of each RoI by its scale."""
    scale = torch.sqrt((rois[:, 3] - rois[:, 1]) * (rois[:, 4] - rois[:, 2]))
    return torch.floor(torch.log2(scale / finest_scale + 1e-6)).clamp(0, num_levels - 1).long()


def make_cases(device: str) -> List[Case]:
    """Single-level and 4-level FPN workloads."""
    gen = torch.Generator().manual_seed(0)
    cases: List[Case] = []
    for num, sr, mode in [(256, 0, 'avg'), (512, 0, 'avg'), (256, 2, 'avg'), (512, 2, 'avg'),
                          (256, 2, 'max')]:
        feat = torch.randn(1, 256, 50, 50, generator=gen)
        rois = random_rois(num, 800, 1, gen)
        cases.append((f'1x256x50x50, {num} RoIs, stride 16, sr={sr}, {mode}', [feat], [rois],
                      dict(output_size=7, spatial_scales=[1 / 16], sampling_ratio=sr,
                           pool_mode=mode)))
    img = 1024
    strides = [4, 8, 16, 32]
    feats = [torch.randn(2, 256, img // s, img // s, generator=gen) for s in strides]
    rois = random_rois(1024, img, 2, gen)
    levels = fpn_levels(rois)
    per_level = [rois[levels == i] for i in range(len(strides))]
    counts = '/'.join(str(len(r)) for r in per_level)
    cases.append((f'FPN 2x256x{{256,128,64,32}}^2, 1024 RoIs ({counts}), sr=0, avg', feats,
                  per_level, dict(output_size=7, spatial_scales=[1 / s for s in strides],
                                  sampling_ratio=0, pool_mode='avg')))
    return [(name, [f.to(device) for f in fs], [r.to(device) for r in rs], kw)
            for name, fs, rs, kw in cases]


def build_layers(cls: type, kw: Dict) -> List[torch.nn.Module]:
    """One layer per feature level, as mmdet's RoI extractor builds them."""
    return [cls(kw['output_size'], scale, kw['sampling_ratio'], kw['pool_mode'], True)
            for scale in kw['spatial_scales']]


def step_fn(layers: Sequence[torch.nn.Module], feats: Sequence[torch.Tensor],
            rois: Sequence[torch.Tensor], device: str) -> Callable[[], Tuple[float, list]]:
    """A closure timing one forward+backward over all levels."""
    def step() -> Tuple[float, list]:
        inputs = [f.clone().requires_grad_(True) for f in feats]
        if device != 'cpu':
            torch.cuda.synchronize()
        start = time.perf_counter()
        outs = [layer(x, r) for layer, x, r in zip(layers, inputs, rois, strict=True)]
        sum(o.sum() for o in outs).backward()
        if device != 'cpu':
            torch.cuda.synchronize()
        return time.perf_counter() - start, [o.detach() for o in outs]
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--threads', type=int, default=1, help='torch intra-op threads')
    parser.add_argument('--reps', type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from mmcv.ops import RoIAlign

    where = (f'{torch.cuda.get_device_name()}, CUDA {torch.version.cuda}'
             if args.device == 'cuda' else platform.processor() or platform.machine())
    print(f'torch {torch.__version__}, device {args.device}, threads {args.threads}, '
          f'{where}, median of {args.reps} reps')
    print('| case | mmcv.ops.RoIAlign (ms) | DeterministicRoIAlign (ms) | ratio | '
          'fwd bit-identical |')
    print('|---|---:|---:|---:|:---:|')
    for name, feats, rois, kw in make_cases(args.device):
        ref = step_fn(build_layers(RoIAlign, kw), feats, rois, args.device)
        det = step_fn(build_layers(DeterministicRoIAlign, kw), feats, rois, args.device)
        ref(), det()  # warm-up
        times: Dict[str, List[float]] = {'ref': [], 'det': []}
        same = True
        for _ in range(args.reps):
            t_ref, out_ref = ref()
            t_det, out_det = det()
            times['ref'].append(t_ref)
            times['det'].append(t_det)
            same &= all(torch.equal(a, b) for a, b in zip(out_ref, out_det, strict=True))
        ms_ref, ms_det = (1e3 * statistics.median(times[k]) for k in ('ref', 'det'))
        ratio = ms_det / ms_ref if ms_ref > 0 else math.nan
        print(f'| {name} | {ms_ref:.1f} | {ms_det:.1f} | {ratio:.2f}x | '
              f"{'yes' if same else 'no'} |")


if __name__ == '__main__':
    main()
