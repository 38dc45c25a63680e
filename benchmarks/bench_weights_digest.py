#!/usr/bin/env python
"""Cost of the weights digest every checkpoint save computes, beside the save itself.

For MMDetection's R50-FPN RetinaNet and Faster R-CNN (random init, no download), a
checkpoint as MMEngine writes one (``state_dict`` and an SGD-with-momentum optimizer
state of the same size) is saved with ``torch.save`` to a temporary file and its
weights are digested (:func:`mmrepro.resume.digests.weights_digest`), alternately, each
``--repeats`` times; the table gives the medians and their ratio, measured side by side
in one run. Keep the machine otherwise idle.

    python benchmarks/bench_weights_digest.py [--repeats 5] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from timing import report  # noqa: E402 (benchmarks/timing.py, next to this script)

#: MMDetection's configs, inside the installed package (``mmdet/.mim/configs``).
CONFIGS = {'RetinaNet R50-FPN': 'retinanet/retinanet_r50_fpn_1x_coco.py',
           'Faster R-CNN R50-FPN': 'faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py'}


def checkpoint_of(config: str) -> dict:
    """A checkpoint of the config's model as MMEngine saves it (weights, optimizer)."""
    import mmdet
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    from mmengine.runner.checkpoint import weights_to_cpu
    register_all_modules()
    cfg = Config.fromfile(osp.join(osp.dirname(mmdet.__file__), '.mim', 'configs', config))
    cfg.model.backbone.init_cfg = None
    model = MODELS.build(cfg.model)
    state = weights_to_cpu(model.state_dict())
    momentum = {i: {'momentum_buffer': p.detach().clone()}
                for i, p in enumerate(model.parameters())}
    return dict(meta=dict(iter=1), state_dict=state,
                optimizer=dict(state=momentum, param_groups=[]))


def median_seconds(checkpoint: dict, repeats: int, path: str) -> tuple:
    """Median seconds of ``torch.save`` and of the digest, taken alternately."""
    from mmrepro.resume.digests import weights_digest
    saves, digests = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.save(checkpoint, path)
        saves.append(time.perf_counter() - start)
        start = time.perf_counter()
        weights_digest(checkpoint)
        digests.append(time.perf_counter() - start)
    return statistics.median(saves), statistics.median(digests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=5, help='timings of each (median)')
    parser.add_argument('--out', help='also write the table to this Markdown file')
    args = parser.parse_args()
    rows = ['| model | weights | checkpoint file | torch.save | digest | digest / save |',
            '|---|---|---|---|---|---|']
    with tempfile.TemporaryDirectory(prefix='mmrepro-bench-digest-') as tmp:
        path = osp.join(tmp, 'ckpt.pth')
        for name, config in CONFIGS.items():
            checkpoint = checkpoint_of(config)
            weights = sum(t.numel() * t.element_size()
                          for t in checkpoint['state_dict'].values())
            save, digest = median_seconds(checkpoint, args.repeats, path)
            rows.append(f'| {name} | {weights / 2**20:.0f} MiB | '
                        f'{os.path.getsize(path) / 2**20:.0f} MiB | {save * 1e3:.0f} ms | '
                        f'{digest * 1e3:.0f} ms | {digest / save:.2f}x |')
    report('Weights digest at each checkpoint save (CPU)', torch.get_num_threads(),
           f'median of {args.repeats}', rows, args.out)


if __name__ == '__main__':
    main()
