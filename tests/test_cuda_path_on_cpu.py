"""Every family with replaced ops trained through the CUDA code path, on CPU.

With CPU among the Triton devices (``routing.DEVICES``, what ``MMREPRO_TRITON_ON_CPU=1``
sets) and Triton's interpreter, a CPU run takes the path a CUDA run takes: mmrepro's
Triton RoIAlign backward, its bilinear-primitive ops (deformable convolution,
multi-scale deformable attention, ``point_sample``) and its adaptive pooling, inside
the real mmdet models of the zoo configs. Each family trains 2 iterations (the config's
optimizer, ``model.train_step``) twice through that path, and once through the CPU path
(mmcv's and PyTorch's ops):

- the rerun is bit-identical: losses, gradients and the final ``state_dict`` bytes;
- the Triton kernels (or, for RTMDet, the matrix-product pooling) really ran;
- losses and first-iteration gradients match the CPU path to float rounding.

Interpreted kernels cost about a second per thousand programs, so the models are the
zoo's with one image of 64x48 pixels per batch, 16 sampled RoIs per stage and one
sampling point per level; the code path is unchanged. Faster R-CNN also trains through
``check_repro`` (the Runner, its hooks and checkpoints) on the CUDA path.
"""
from __future__ import annotations

import copy
import os
import os.path as osp
import random
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Dict, List

import numpy as np
import pytest
import torch
from repro_utils import REPO, pythonpath, skip_unless_triton_kernels_run

from mmrepro.cli import support_matrix as sm

pytestmark = pytest.mark.slow
skip_unless_triton_kernels_run()

SMALL = {'train_dataloader.batch_size': 1, 'train_dataloader.num_workers': 0,
         'train_dataloader.persistent_workers': False}
RESIZE = {'train_dataloader.dataset.pipeline.2.scale': (64, 48)}
RCNN = {**SMALL, **RESIZE, 'model.train_cfg.rpn_proposal.max_per_img': 32,
        'model.train_cfg.rcnn.sampler.num': 16}
ONE_POINT = {'model.encoder.layer_cfg.self_attn_cfg.num_points': 1,
             'model.decoder.layer_cfg.cross_attn_cfg.num_points': 1}
BILINEAR = ('bilinear_kernels.forward_kernel', 'bilinear_kernels.entries_kernel',
            'bilinear_kernels.sample_grads_kernel', 'csr_kernels.csr_sum_kernel')
ROI_ALIGN = ('roi_align_triton.entries_kernel', 'csr_kernels.csr_sum_kernel')
#: family: (options that make it small, the kernels its CUDA path must launch).
FAMILIES = {
    'faster-rcnn': (RCNN, ROI_ALIGN),
    'mask-rcnn': (RCNN, ROI_ALIGN),
    'cascade-rcnn': ({**SMALL, **RESIZE, 'model.train_cfg.rpn_proposal.max_per_img': 32,
                      **{f'model.train_cfg.rcnn.{i}.sampler.num': 16 for i in range(3)}},
                     ROI_ALIGN),
    # mmcv's deform_conv2d needs the stride-32 map to be at least 3x3.
    'dcn-faster-rcnn': ({**RCNN, 'train_dataloader.dataset.pipeline.2.scale': (96, 96)},
                        BILINEAR + ROI_ALIGN[:1]),
    'deformable-detr': ({**SMALL, **RESIZE, **ONE_POINT}, BILINEAR),
    'dino': ({**SMALL, **RESIZE, **ONE_POINT}, BILINEAR),
    'mask2former': ({**SMALL, **RESIZE,
                     'model.data_preprocessor.batch_augments.0.size': (64, 64),
                     'model.panoptic_head.pixel_decoder.encoder.layer_cfg.self_attn_cfg.'
                     'num_points': 1, 'model.train_cfg.num_points': 64}, BILINEAR),
    'rtmdet': (SMALL, ()),
}


@dataclass
class Run:
    """Two training iterations: logged losses, gradients before each step, weights."""
    losses: List[Dict[str, float]]
    grads: List[Dict[str, torch.Tensor]]
    state: Dict[str, torch.Tensor]
    launches: Counter


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _config(family: str, data_root: str):
    from mmengine.config import Config
    os.environ[sm.DATA_ENV] = osp.join(data_root, '')
    cfg = Config.fromfile(sm.config_path(family))
    cfg.merge_from_dict(FAMILIES[family][0])
    return cfg


_BATCHES: Dict[str, list] = {}


def _batches(family: str, cfg) -> list:
    """Two one-image batches through the config's pipeline (drawn once per family)."""
    if family not in _BATCHES:
        from mmdet.registry import DATASETS
        from mmengine.dataset import pseudo_collate
        dataset = DATASETS.build(cfg.train_dataloader.dataset)
        _seed(0)
        _BATCHES[family] = [pseudo_collate([dataset[i]]) for i in (0, 1)]
    return _BATCHES[family]


def _train(family: str, data_root: str, cuda_path: bool, monkeypatch) -> Run:
    """Build the family's model (seed 0), audit it as mmrepro does, train 2 iterations."""
    from mmengine.optim import build_optim_wrapper
    from mmengine.registry import init_default_scope
    from triton.runtime.interpreter import InterpretedFunction

    from mmrepro.op_audit import audit_model
    from mmrepro.ops import adaptive_pool, routing

    cfg = _config(family, data_root)
    init_default_scope('mmdet')
    from mmdet.registry import MODELS
    batches = _batches(family, cfg)
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
        launches['adaptive_avg_pool2d'] += 1
        return pool(*args, **kwargs)

    losses = []
    with monkeypatch.context() as patch:
        patch.setattr(routing, 'DEVICES', {'cuda', 'cpu'} if cuda_path else {'cuda'})
        patch.setattr(InterpretedFunction, 'run', counted_run)
        patch.setattr(adaptive_pool, 'adaptive_avg_pool2d', counted_pool)
        for i, batch in enumerate(batches):
            _seed(1 + i)
            log_vars = model.train_step(copy.deepcopy(batch), optim_wrapper)
            losses.append({k: float(v) for k, v in log_vars.items()})
    return Run(losses, grads, {k: v.clone() for k, v in model.state_dict().items()},
               launches)


def _assert_identical(a: Run, b: Run) -> None:
    assert a.losses == b.losses
    for name in a.state:
        assert torch.equal(a.state[name], b.state[name]), name
    for step_a, step_b in zip(a.grads, b.grads):
        for name in step_a:
            assert torch.equal(step_a[name], step_b[name]), name


@pytest.mark.parametrize('family', list(FAMILIES))
def test_cuda_path_trains_bit_exactly_and_matches_the_cpu_path(family, data_root,
                                                                monkeypatch):
    cuda = _train(family, data_root, True, monkeypatch)
    again = _train(family, data_root, True, monkeypatch)
    cpu = _train(family, data_root, False, monkeypatch)
    _assert_identical(cuda, again)
    kernels = FAMILIES[family][1]
    if kernels:
        assert sorted(cuda.launches) == sorted(kernels), cuda.launches
        assert not cpu.launches
    else:  # RTMDet: the CUDA path pools with matrix products, the CPU path with PyTorch
        assert cuda.launches['adaptive_avg_pool2d'] >= 2 and not cpu.launches
    assert len(cuda.grads) == len(cpu.grads) == 2
    for i, (ours, theirs) in enumerate(zip(cuda.losses, cpu.losses)):
        for key, value in theirs.items():
            assert ours[key] == pytest.approx(value, rel=1e-4 if i else 1e-5, abs=1e-6), key
    for name, theirs in cpu.grads[0].items():
        ours = cuda.grads[0][name]
        scale = theirs.abs().max().item()
        torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-4 * scale + 1e-10,
                                   msg=name)


def test_faster_rcnn_check_repro_on_the_cuda_path(tmp_path, data_root):
    """The Runner (hooks, data loader, checkpoints) around the CUDA path: bit-identical."""
    env = {k: v for k, v in os.environ.items() if k != 'MMREPRO_TRITON_ON_CPU'}
    env.update({sm.DATA_ENV: osp.join(data_root, ''), 'OMP_NUM_THREADS': '1',
                'PYTHONPATH': pythonpath(REPO), 'TRITON_INTERPRET': '1',
                'MMREPRO_TRITON_ON_CPU': '1'})
    options = [f'{k}={v}'.replace(' ', '') for k, v in FAMILIES['faster-rcnn'][0].items()]
    proc = subprocess.run(
        [sys.executable, '-m', 'mmrepro.cli.check_repro', sm.config_path('faster-rcnn'),
         '--iters', '2', '--work-dir', str(tmp_path), '--cfg-options', *options],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert 'result: REPRODUCIBLE: 1 comparison(s) bit-identical' in proc.stdout
