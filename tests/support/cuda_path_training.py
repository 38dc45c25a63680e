"""Train each zoo family with replaced ops for 2 iterations, on the CUDA or CPU path.

Used by ``tests/e2e/test_cuda_path_on_cpu.py``, in its own process for the CUDA path::

    MMREPRO_TRITON_ON_CPU=1 TRITON_INTERPRET=1 python tests/support/cuda_path_training.py \\
        DATA_ROOT OUT_DIR values|digests FAMILY...

which writes ``OUT_DIR/FAMILY.pt`` per family (:func:`summary` of :func:`train`). Interpreted Triton
kernels cost about a millisecond per loop step of a program, so the models are the zoo
configs with one image per batch at 64x48 pixels (48x32 for the two DETRs), 16
proposals and 8 sampled RoIs per stage, one sampling point per level and 10 denoising
queries (DINO); DCN Faster R-CNN keeps deformable convolutions in its last stage only,
at 96x96 pixels (mmcv needs that stage's map to be at least 3x3). The code path is
unchanged.
"""
from __future__ import annotations

import copy
import os
import os.path as osp
import random
import sys
from collections import Counter
from typing import Any, Dict, List

import numpy as np
import torch

SMALL = {'train_dataloader.batch_size': 1, 'train_dataloader.num_workers': 0,
         'train_dataloader.persistent_workers': False}
RESIZE = {'train_dataloader.dataset.pipeline.2.scale': (64, 48)}
#: The DETRs' images (R-CNN anchors need 64x48 to fit; Mask2Former pads to 64x64).
RESIZE_DETR = {'train_dataloader.dataset.pipeline.2.scale': (48, 32)}
PROPOSALS = {'model.train_cfg.rpn_proposal.max_per_img': 16}
RCNN = {**SMALL, **RESIZE, **PROPOSALS, 'model.train_cfg.rcnn.sampler.num': 8}
ONE_POINT = {'model.encoder.layer_cfg.self_attn_cfg.num_points': 1,
             'model.decoder.layer_cfg.cross_attn_cfg.num_points': 1}
BILINEAR = ('bilinear_kernels.forward_kernel', 'bilinear_kernels.entries_kernel',
            'bilinear_kernels.sample_grads_kernel', 'csr_kernels.csr_sum_kernel')
ROI_ALIGN = ('triton_entries.entries_kernel', 'csr_kernels.csr_sum_kernel')
#: Counted for RTMDet, whose replaced op (adaptive pooling) has no Triton kernel.
POOL = 'adaptive_pool.adaptive_avg_pool2d'
#: family: (options that make it small, what its CUDA path must launch).
FAMILIES = {
    'faster-rcnn': (RCNN, ROI_ALIGN),
    'mask-rcnn': (RCNN, ROI_ALIGN),
    'cascade-rcnn': ({**SMALL, **RESIZE, **PROPOSALS,
                      **{f'model.train_cfg.rcnn.{i}.sampler.num': 8 for i in range(3)}},
                     ROI_ALIGN),
    'dcn-faster-rcnn': ({**RCNN, 'train_dataloader.dataset.pipeline.2.scale': (96, 96),
                         'model.backbone.stage_with_dcn': (False, False, False, True)},
                        BILINEAR + ROI_ALIGN[:1]),
    'deformable-detr': ({**SMALL, **RESIZE_DETR, **ONE_POINT}, BILINEAR),
    'dino': ({**SMALL, **RESIZE_DETR, **ONE_POINT, 'model.dn_cfg.group_cfg.num_dn_queries': 10},
             BILINEAR),
    'mask2former': ({**SMALL, **RESIZE,
                     'model.data_preprocessor.batch_augments.0.size': (64, 64),
                     'model.panoptic_head.pixel_decoder.encoder.layer_cfg.self_attn_cfg.'
                     'num_points': 1, 'model.train_cfg.num_points': 64}, BILINEAR),
    'rtmdet': (SMALL, (POOL,)),
}


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _batches(cfg: Any) -> list:
    """Two one-image batches through the config's pipeline, drawn from seed 0."""
    from mmdet.registry import DATASETS
    from mmengine.dataset import pseudo_collate
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    _seed(0)
    return [pseudo_collate([dataset[i]]) for i in (0, 1)]


def train(family: str, data_root: str) -> Dict[str, Any]:
    """Build the family's model from seed 0, make it deterministic as mmrepro does
    (``audit_model``), and train 2 iterations: ``model.train_step`` with the config's
    optimizer wrapper, as the Runner's loop calls it. The path is the one
    :data:`mmrepro.ops.routing.DEVICES` selects for CPU tensors.

    Returns:
        ``losses`` (per iteration), ``grads`` (per iteration, read before the step),
        ``state`` (the final ``state_dict``) and ``launches`` (Triton kernels launched
        and adaptive poolings done through mmrepro's ops, by name).
    """
    from mmdet.registry import MODELS
    from mmengine.config import Config
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import init_default_scope
    from triton.runtime.interpreter import InterpretedFunction

    from mmrepro.checks.matrix import run as sm
    from mmrepro.ops import adaptive_pool
    from mmrepro.ops.op_audit import audit_model

    before = os.environ.get(sm.DATA_ENV)
    os.environ[sm.DATA_ENV] = osp.join(data_root, '')  # read while the config is parsed
    try:
        cfg = Config.fromfile(sm.config_path(family))
    finally:  # later tests in this process must not see it
        if before is None:
            del os.environ[sm.DATA_ENV]
        else:
            os.environ[sm.DATA_ENV] = before
    cfg.merge_from_dict(FAMILIES[family][0])
    init_default_scope('mmdet')
    batches = _batches(cfg)
    _seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    audit_model(model, deterministic=True, strict=False, replace=True)
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    grads: List[Dict[str, torch.Tensor]] = []
    optim_wrapper.optimizer.register_step_pre_hook(lambda *_: grads.append(
        {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    launches: Counter = Counter()
    run_kernel, pool = InterpretedFunction.run, adaptive_pool.adaptive_avg_pool2d

    def counted_run(self, *args, **kwargs):
        launches[f'{self.fn.__module__.rpartition(".")[2]}.{self.fn.__name__}'] += 1
        return run_kernel(self, *args, **kwargs)

    def counted_pool(*args, **kwargs):
        launches[POOL] += 1
        return pool(*args, **kwargs)

    InterpretedFunction.run, adaptive_pool.adaptive_avg_pool2d = counted_run, counted_pool
    losses = []
    try:
        for i, batch in enumerate(batches):
            _seed(1 + i)
            log_vars = model.train_step(copy.deepcopy(batch), optim_wrapper)
            losses.append({k: float(torch.as_tensor(v).detach()) for k, v in log_vars.items()})
    finally:
        InterpretedFunction.run, adaptive_pool.adaptive_avg_pool2d = run_kernel, pool
    return dict(losses=losses, grads=grads, launches=dict(launches),
                state={k: v.clone() for k, v in model.state_dict().items()})


def summary(run: Dict[str, Any], values: bool) -> Dict[str, Any]:
    """What the test compares: losses, launches, digests of the weights and of each
    step's gradients, and (``values``) the first step's gradients themselves."""
    from mmrepro.checks.matrix.epoch_resume import object_digest
    return dict(losses=run['losses'], launches=run['launches'],
                state=object_digest(run['state']),
                grads=[object_digest(step) for step in run['grads']],
                first_grads=run['grads'][0] if values else None)


def main(argv: List[str]) -> int:
    data_root, out_dir, mode, *families = argv
    torch.set_num_threads(1)
    for family in families:
        torch.save(summary(train(family, data_root), mode == 'values'),
                   osp.join(out_dir, f'{family}.pt'))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
