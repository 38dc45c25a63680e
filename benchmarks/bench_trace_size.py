#!/usr/bin/env python
"""Trace size on disk per traced iteration, for MMDetection's own model configs.

A trace line holds every loss (``float.hex``) and a 16-hex-digit digest per
gradient, weight after the step and buffer, keyed by name
(:class:`mmrepro.trace.Tracer`); rank 0's line of a traced step also holds the whole
step (:mod:`mmrepro.trace.steps`): a digest per sample of the global batch, every
micro-batch's losses and a digest per applied gradient. Its size depends on the
model's parameter and buffer names and the batch, so this script builds each model
(no weights, no data) and writes the line the tracer writes for it, with every digest
and loss at its full printed length, for the config's batch of 2 or more images per
GPU. It prints the bytes per line and the trace size over each model's standard
schedule at ``trace_interval`` 1 and 50 (the dense early steps 1, 2, 4, 8, 16, 32 are
traced as well).

    python benchmarks/bench_trace_size.py
"""
from __future__ import annotations

import json
import os.path as osp
import sys
from typing import Any, Dict

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

COCO_IMAGES = 118287
#: (config under mmdet's configs, epochs, total batch size) of its standard schedule.
MODELS = (
    ('retinanet/retinanet_r50_fpn_1x_coco.py', 12, 16),
    ('faster_rcnn/faster-rcnn_r50_fpn_1x_coco.py', 12, 16),
    ('mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py', 12, 16),
    ('yolox/yolox_s_8xb8-300e_coco.py', 300, 64),
    ('rtmdet/rtmdet_tiny_8xb32-300e_coco.py', 300, 256),
    ('rtmdet/rtmdet_l_8xb32-300e_coco.py', 300, 256),
)
#: A loss's ``float.hex`` at its longest (22 characters).
LOSS_HEX = '-0x1.0123456789abcp-10'
#: The dense early steps below the default interval of 50 (``traced_step``).
DENSE = (1, 2, 4, 8, 16, 32)
#: Loss names of a two-stage detector with masks.
LOSSES = ('loss_rpn_cls', 'loss_rpn_bbox', 'loss_cls', 'loss_bbox', 'loss_mask', 'acc')


def line_bytes(model: Any, batch: int, per_gpu: int) -> int:
    """Bytes of one traced step's line (with its newline) for ``model`` at a global batch
    of ``batch`` images, ``per_gpu`` per micro-batch, as rank 0's tracer writes it."""
    from mmrepro.trace import SECTIONS
    digest = '0123456789abcdef'  # to_hex: 16 hex digits
    names = dict(grad=[n for n, p in model.named_parameters() if p.requires_grad],
                 weight=[n for n, _ in model.named_parameters()],
                 buffer=[n for n, _ in model.named_buffers()])
    line: Dict[str, Any] = dict(iter=100000, epoch=300, batch_idx=10000,
                                losses=dict.fromkeys(LOSSES, LOSS_HEX))
    line.update({section: dict.fromkeys(names[section], digest)
                 for section in SECTIONS[1:]})  # the tracer's sections without forward
    line.update(step=100000, step_data={str(n): f'img_id=123456 {digest}' for n in range(batch)},
                step_losses={f'{s}.{name}': LOSS_HEX for s in range(batch // per_gpu)
                             for name in LOSSES},
                step_grad=dict.fromkeys(names['grad'], digest))
    return len(json.dumps(line)) + 1


def main() -> None:
    import mmdet
    from mmdet.registry import MODELS as REGISTRY
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    register_all_modules()
    root = osp.join(osp.dirname(mmdet.__file__), '.mim', 'configs')
    print('| config | params | buffers | bytes per traced iteration | schedule (iterations) '
          '| trace_interval=1 | trace_interval=50 (default) |')
    print('|---|---|---|---|---|---|---|')
    for name, epochs, batch in MODELS:
        iters = epochs * -(-COCO_IMAGES // batch)
        cfg = Config.fromfile(osp.join(root, name))
        cfg.model.backbone.init_cfg = None
        model = REGISTRY.build(cfg.model)
        per_gpu = cfg.train_dataloader.batch_size
        size = line_bytes(model, batch, per_gpu)
        every = size * iters / 2**20
        default = size * (iters // 50 + len(DENSE)) / 2**20
        print(f'| {name} | {len(list(model.parameters()))} | {len(list(model.buffers()))} '
              f'| {size / 1024:.1f} KiB | {iters} | {every:.0f} MiB | {default:.0f} MiB |')


if __name__ == '__main__':
    main()
