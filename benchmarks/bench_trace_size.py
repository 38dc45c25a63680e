#!/usr/bin/env python
"""Trace size on disk per traced iteration, for MMDetection's own model configs.

A trace line holds every loss (``float.hex``) and a 16-hex-digit digest per
gradient, weight after the step and buffer, keyed by name
(:class:`mmrepro.trace.Tracer`). Its size depends on the model's parameter and buffer
names only, so this script builds each model (no weights, no data) and writes the
line the tracer writes for it, with every digest and loss at its full printed
length. It prints the bytes per line and the trace size over each model's standard
schedule at ``trace_interval`` 1 and 50 (the first iteration is traced as well).

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
#: Loss names of a two-stage detector with masks.
LOSSES = ('loss_rpn_cls', 'loss_rpn_bbox', 'loss_cls', 'loss_bbox', 'loss_mask', 'acc')


def line_bytes(model: Any) -> int:
    """Bytes of one trace line (with its newline) for ``model``, as the tracer writes it."""
    from mmrepro.trace import SECTIONS
    digest = '0123456789abcdef'  # to_hex: 16 hex digits
    names = dict(grad=[n for n, p in model.named_parameters() if p.requires_grad],
                 weight=[n for n, _ in model.named_parameters()],
                 buffer=[n for n, _ in model.named_buffers()])
    line: Dict[str, Any] = dict(iter=100000, epoch=300, batch_idx=10000,
                                losses=dict.fromkeys(LOSSES, LOSS_HEX))
    line.update({section: dict.fromkeys(names[section], digest)
                 for section in SECTIONS[1:]})  # the tracer's sections without forward
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
        size = line_bytes(model)
        every = size * iters / 2**20
        default = size * (1 + iters // 50) / 2**20
        print(f'| {name} | {len(list(model.parameters()))} | {len(list(model.buffers()))} '
              f'| {size / 1024:.1f} KiB | {iters} | {every:.0f} MiB | {default:.0f} MiB |')


if __name__ == '__main__':
    main()
