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
import sys
import tempfile
from typing import Dict

import torch

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
sys.path.insert(0, ROOT)

from timing import median_seconds, report  # noqa: E402 (benchmarks/timing.py, beside it)

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


def measure(checkpoint: dict, path: str, repeats: int) -> Dict[str, float]:
    """Median milliseconds of each step (see the module)."""
    from mmrepro.resume.checkpoint_io import peek, safe_load
    from mmrepro.resume.digests import PARTS, WEIGHTS, check_parts, seal, weights_digest
    steps = dict(save=lambda: torch.save(checkpoint, path),
                 weights=lambda: weights_digest(checkpoint), seal=lambda: seal(checkpoint))
    out = {step: median_seconds(run, repeats) * 1e3 for step, run in steps.items()}
    torch.save(checkpoint, path)  # sealed
    checks = check_parts(peek(path), PARTS)
    assert checks and not any(check.differs for check in checks), checks
    steps = dict(load=lambda: safe_load(path), resume=lambda: check_parts(peek(path), PARTS),
                 weights_only=lambda: check_parts(peek(path), (WEIGHTS,)))
    out.update({step: median_seconds(run, repeats) * 1e3 for step, run in steps.items()})
    return out


def row(name: str, config: str, path: str, repeats: int) -> str:
    """The table's row of one model, its checkpoint written to ``path``."""
    checkpoint = checkpoint_of(config)
    ms = measure(checkpoint, path, repeats)
    weights = sum(t.numel() * t.element_size() for t in checkpoint['state_dict'].values())
    sizes = f'{weights / 2**20:.0f} MiB | {os.path.getsize(path) / 2**20:.0f} MiB'
    times = ' | '.join(f'{ms[step]:.0f} ms' for step in (
        'save', 'weights', 'seal', 'load', 'resume', 'weights_only'))
    return f'| {name} | {sizes} | {times} |'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=5, help='timings of each (median)')
    parser.add_argument('--out', help='also write the table to this Markdown file')
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix='mmrepro-bench-verify-') as tmp:
        rows = [row(name, config, osp.join(tmp, 'epoch_1.pth'), args.repeats)
                for name, config in CONFIGS.items()]
    head = ['| model | weights | checkpoint file | torch.save | weights digest (before) | '
            'all digests at save | safe_load | verify a resume | verify the weights |',
            '|---|---|---|---|---|---|---|---|---|']
    report('Checkpoint digests at save and verification at load (CPU)',
           torch.get_num_threads(), f'median of {args.repeats}', head + rows, args.out)


if __name__ == '__main__':
    main()
