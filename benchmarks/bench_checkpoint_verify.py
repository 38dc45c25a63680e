#!/usr/bin/env python
"""Cost of checkpoints that prove themselves: the digests at each save, the check at a load.

For the demo RetinaNet (R18-FPN, ``configs/retinanet_r18_fpn_3e_tinycoco.py``) and
MMDetection's R50-FPN RetinaNet (random init, no download), a checkpoint as a resume
needs it (``state_dict``, SGD-with-momentum optimizer state of the same size, the
parameter schedulers' state and the ``mmrepro`` section) is built here and saved with
``torch.save`` to a temporary file. Timed, each ``--repeats`` times, the median taken:

- at save: the weights digest alone (what every save computed before) and all the digests
  (:func:`mmrepro.resume.digests.seal`), beside ``torch.save`` itself;
- at load: reading the file (:func:`mmrepro.resume.checkpoint_io.safe_load`) and the
  check, once per load, of what a resume restores and of the weights alone (``load_from``,
  ``mmrepro-test``), each on the file peeked at (memory-mapped) as the training tool
  does before anything is built (:func:`mmrepro.resume.digests.check_parts`).

The file stays in the page cache, as right after a copy. Keep the machine otherwise idle.

    python benchmarks/bench_checkpoint_verify.py [--repeats 5] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict

import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

from timing import report  # noqa: E402 (benchmarks/timing.py, next to this script)

#: The models: a config file, or one inside MMDetection's package (``mmdet/.mim``).
CONFIGS = {'demo RetinaNet R18-FPN': osp.join(ROOT, 'configs',
                                              'retinanet_r18_fpn_3e_tinycoco.py'),
           'RetinaNet R50-FPN': 'retinanet/retinanet_r50_fpn_1x_coco.py'}


def checkpoint_of(config: str) -> dict:
    """A checkpoint of the config's model as a resume needs it."""
    import mmdet
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    from mmengine.optim import MultiStepLR, OptimWrapper
    from mmengine.runner.checkpoint import weights_to_cpu

    import mmrepro  # noqa: F401  (mmrepro:: config paths)
    from mmrepro.resume.section import build_section
    from mmrepro.rng.host_state import ProcessRNGs
    from mmrepro.run.settings import RunSettings
    register_all_modules()
    if not osp.isfile(config):
        config = osp.join(osp.dirname(mmdet.__file__), '.mim', 'configs', config)
    cfg = Config.fromfile(config)
    cfg.model.backbone.init_cfg = None
    model = MODELS.build(cfg.model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter)
    optimizer.step()  # every parameter gets its momentum buffer
    wrapper = OptimWrapper(optimizer)
    scheduler = MultiStepLR(wrapper, milestones=[8, 11], by_epoch=True)
    section = build_section(0, RunSettings(seed=0).to_dict(), 1, 2, 'epoch',
                            dict(epoch=1, global_batches=4, global_batch=2),
                            [ProcessRNGs().state_dict()])
    return dict(meta=dict(epoch=1, iter=8), state_dict=weights_to_cpu(model.state_dict()),
                message_hub={}, optimizer=wrapper.state_dict(),
                param_schedulers=[scheduler.state_dict()], mmrepro=section)


def median_ms(run: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``run``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(checkpoint: dict, path: str, repeats: int) -> Dict[str, float]:
    """Median milliseconds of each step (see the module)."""
    from mmrepro.resume.checkpoint_io import peek, safe_load
    from mmrepro.resume.digests import PARTS, WEIGHTS, check_parts, seal, weights_digest
    out = dict(save=median_ms(lambda: torch.save(checkpoint, path), repeats),
               weights=median_ms(lambda: weights_digest(checkpoint), repeats),
               seal=median_ms(lambda: seal(checkpoint), repeats))
    torch.save(checkpoint, path)  # sealed
    checks = check_parts(peek(path), PARTS)
    assert checks and not any(check.differs for check in checks), checks
    out.update(load=median_ms(lambda: safe_load(path), repeats),
               resume=median_ms(lambda: check_parts(peek(path), PARTS), repeats),
               weights_only=median_ms(lambda: check_parts(peek(path), (WEIGHTS,)), repeats))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=5, help='timings of each (median)')
    parser.add_argument('--out', help='also write the table to this Markdown file')
    args = parser.parse_args()
    rows = ['| model | weights | checkpoint file | torch.save | weights digest (before) | '
            'all digests at save | safe_load | verify a resume | verify the weights |',
            '|---|---|---|---|---|---|---|---|---|']
    with tempfile.TemporaryDirectory(prefix='mmrepro-bench-verify-') as tmp:
        path = osp.join(tmp, 'epoch_1.pth')
        for name, config in CONFIGS.items():
            checkpoint = checkpoint_of(config)
            weights = sum(t.numel() * t.element_size()
                          for t in checkpoint['state_dict'].values())
            ms = measure(checkpoint, path, args.repeats)
            rows.append(f"| {name} | {weights / 2**20:.0f} MiB | "
                        f"{os.path.getsize(path) / 2**20:.0f} MiB | {ms['save']:.0f} ms | "
                        f"{ms['weights']:.0f} ms | {ms['seal']:.0f} ms | {ms['load']:.0f} ms | "
                        f"{ms['resume']:.0f} ms | {ms['weights_only']:.0f} ms |")
    report('Checkpoint digests at save and verification at load (CPU)',
           torch.get_num_threads(), f'median of {args.repeats}', rows, args.out)


if __name__ == '__main__':
    main()
