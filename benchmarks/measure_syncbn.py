#!/usr/bin/env python
"""SyncBN across process layouts of one global batch: 2 ranks x 2 vs 1 x 2 x 2, CPU.

``torch.nn.SyncBatchNorm`` refuses CPU tensors ("SyncBatchNorm expected input tensor to
be on GPU ..."), so on CPU gloo ranks this benchmark emulates it with
:class:`EmulatedSyncBN` (registered here as ``EmulatedSyncBN``; training imports this
module through ``custom_imports`` with ``benchmarks/`` on ``PYTHONPATH``) and puts it in
the model's ``norm_cfg``. One process is what MMEngine makes of a SyncBN config when not
distributed (``Runner.wrap_model`` reverts every SyncBN to ``_BatchNormXd``): BatchNorm
over each micro-batch.

Trains the zoo RTMDet-tiny (``configs/zoo/rtmdet.py``, whose mmdet config uses SyncBN
in backbone, neck and head; EMA and pipeline-switch hooks removed, so the checkpoint
holds the trained weights; ``use_syncbn=False``, else ``RTMDet`` itself converts every
BatchNorm to torch's SyncBatchNorm on more than one rank) for 2 epochs of global batch 4
(8 optimizer steps) on the tiny COCO data and, as a second model, the test suite's
narrow RetinaNet R18 (no cross-rank loss normaliser) with its backbone BatchNorm in
training mode (``norm_eval=False``). Compares, per model:

- (a) 2 ranks x 2 with the emulated SyncBN vs 1 process x 2 x ``accumulative_counts=2``
  with the config's SyncBN (reverted by MMEngine: per-micro-batch BN);
- (b) 2 ranks x 2 vs 1 x 2 x 2, both with plain BN;
- (c) for scale, the 2 x 2 SyncBN run against a rerun of itself.

Parameters and BatchNorm buffers (running mean and variance) are counted apart. The
first table checks the emulation itself: one layer on 2 gloo ranks against
``nn.BatchNorm2d`` over the concatenated batch in one process.

    python benchmarks/measure_syncbn.py [--data DIR] [--models rtmdet retinanet]
"""
from __future__ import annotations

import argparse
import datetime
import os
import os.path as osp
import sys
import tempfile
import warnings
from typing import Dict, List, Tuple

import torch
import torch.distributed as dist
from mmengine.registry import MODELS
from torch import nn

BENCH = osp.dirname(osp.abspath(__file__))
REPO = osp.dirname(BENCH)

warnings.filterwarnings('ignore', message='torch.distributed.nn.functional.all_reduce is '
                        'deprecated', category=FutureWarning)


@MODELS.register_module('EmulatedSyncBN')
class EmulatedSyncBN(nn.BatchNorm2d):
    """BatchNorm whose training-mode statistics cover the batch of every rank (CPU, gloo).

    A stand-in for ``torch.nn.SyncBatchNorm`` on CPU ranks, for this measurement only. It
    is not torch's CUDA kernel (``batch_norm_gather_stats_with_counts``, Welford
    merging): it computes the same quantities with plain tensor ops and two
    ``torch.distributed.nn.functional.all_reduce`` (sums) per layer, which carry
    gradients (backward all-reduces them as well), so it agrees with SyncBN up to
    rounding. In training mode with more than one rank, for each channel:

    - ``mean = sum_r sum(x_r) / N`` and ``var = sum_r sum((x_r - mean)^2) / N`` (biased),
      ``N`` the number of values per channel over all ranks;
    - ``y = (x - mean) / sqrt(var + eps) * weight + bias``;
    - running mean and variance updated with ``momentum`` from ``mean`` and the unbiased
      ``var * N / (N - 1)``, identically on every rank.

    Otherwise (eval mode, or one process) it is ``nn.BatchNorm2d``, as MMEngine's revert
    of SyncBN is.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise ``x`` (N, C, ...) over every rank's batch in training mode."""
        if not (self.training and dist.is_available() and dist.is_initialized()
                and dist.get_world_size() > 1):
            return super().forward(x)
        from torch.distributed.nn.functional import all_reduce
        dims = [0, *range(2, x.dim())]
        shape = [1, -1] + [1] * (x.dim() - 2)
        count = torch.tensor([x.numel() / x.size(1)], dtype=torch.float64)
        dist.all_reduce(count)
        n = float(count)
        mean = all_reduce(x.sum(dims)) / n
        centred = x - mean.view(shape)
        var = all_reduce((centred * centred).sum(dims)) / n
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
                m = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                     else self.momentum)
                self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
                self.running_var.mul_(1 - m).add_(var.detach() * (n / max(n - 1, 1)),
                                                  alpha=m)
        y = centred * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y


# ------------------------------------------------------------------ the emulation check
def _check_rank(rank: int, init: str, out: str) -> None:
    """One of 2 ranks of :func:`check_emulation`: its half of the batch, forward, backward."""
    dist.init_process_group('gloo', init_method=init, rank=rank, world_size=2)
    x, w = _check_inputs()
    layer = EmulatedSyncBN(x.size(1))
    with torch.no_grad():
        layer.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(1))
        layer.bias.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(2))
    part = x[2 * rank:2 * rank + 2].clone().requires_grad_()
    (layer(part) * w[2 * rank:2 * rank + 2]).sum().backward()
    y = layer(part)  # a second step: running statistics updated twice
    torch.save(dict(y=y.detach(), dx=part.grad, dw=layer.weight.grad, db=layer.bias.grad,
                    mean=layer.running_mean, var=layer.running_var),
               osp.join(out, f'rank{rank}.pt'))
    dist.barrier()  # neither rank tears gloo down while the other still uses it
    dist.destroy_process_group()


def _check_inputs() -> Tuple[torch.Tensor, torch.Tensor]:
    """A batch of 4 (8 channels, 6 x 5, away from zero mean) and a loss weighting."""
    g = torch.Generator().manual_seed(0)
    return (torch.randn(4, 8, 6, 5, generator=g) * 3 + 1,
            torch.randn(4, 8, 6, 5, generator=g))


def check_emulation() -> Dict[str, float]:
    """Max relative difference of :class:`EmulatedSyncBN` on 2 gloo ranks (2 + 2 images)
    from ``nn.BatchNorm2d`` over the 4 images in one process.

    Returns:
        {quantity: max |emulated - reference| / max |reference|} for the output, the
        input gradient, weight and bias gradients (summed over ranks, as DDP's sum
        before its average) and the running statistics after two steps.
    """
    import torch.multiprocessing as mp

    from mmrepro.checks.runs import free_port
    out = tempfile.mkdtemp(prefix='mmrepro-syncbn-check-')
    mp.spawn(_check_rank, args=(f'tcp://127.0.0.1:{free_port()}', out), nprocs=2)
    ranks = [torch.load(osp.join(out, f'rank{r}.pt')) for r in range(2)]
    x, w = _check_inputs()
    ref = nn.BatchNorm2d(x.size(1))
    with torch.no_grad():
        ref.weight.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(1))
        ref.bias.uniform_(-0.5, 0.5, generator=torch.Generator().manual_seed(2))
    x = x.clone().requires_grad_()
    (ref(x) * w).sum().backward()
    y = ref(x)
    emulated = dict(y=torch.cat([r['y'] for r in ranks]),
                    dx=torch.cat([r['dx'] for r in ranks]),
                    dw=ranks[0]['dw'] + ranks[1]['dw'], db=ranks[0]['db'] + ranks[1]['db'],
                    mean=ranks[0]['mean'], var=ranks[0]['var'])
    expected = dict(y=y.detach(), dx=x.grad, dw=ref.weight.grad, db=ref.bias.grad,
                    mean=ref.running_mean, var=ref.running_var)
    assert torch.equal(ranks[0]['mean'], ranks[1]['mean'])
    return {k: float((emulated[k] - v).abs().max() / v.abs().max())
            for k, v in expected.items()}


# ------------------------------------------------------------------------ the runs
#: RTMDet-tiny of the zoo: the norm layers of backbone, neck and head set to ``{norm}``;
#: ``use_syncbn=False``, else ``RTMDet.__init__`` converts every BatchNorm to torch's
#: SyncBatchNorm whenever the world size is above 1 (which DDP refuses on CPU).
RTMDET = """_base_ = {base!r}
custom_imports = dict(imports=['mmrepro', 'measure_syncbn'], allow_failed_imports=False)
custom_hooks = []
randomness = dict(threads=1, global_batch=4)
train_dataloader = dict(batch_size=2, num_workers=0, persistent_workers=False)
optim_wrapper = dict(accumulative_counts={micro})
train_cfg = dict(max_epochs=2)
model = dict(use_syncbn=False, backbone=dict(norm_cfg={norm}), neck=dict(norm_cfg={norm}),
             bbox_head=dict(norm_cfg={norm}))
"""
#: The narrow RetinaNet R18 (tests/support/repro_utils.py), backbone BN in training mode.
RETINANET = """custom_imports = dict(imports=['mmrepro', 'measure_syncbn'],
                      allow_failed_imports=False)
randomness = dict(threads=1, global_batch=4)
train_dataloader = dict(batch_size=2)
optim_wrapper = dict(accumulative_counts={micro})
model = dict(backbone=dict(norm_eval=False, norm_cfg={norm}))
"""
#: Norm configs: the emulation, the config's own SyncBN (reverted in one process), BN.
NORMS = {'emulated': "dict(type='EmulatedSyncBN', requires_grad=True)",
         'syncbn': "dict(type='SyncBN', requires_grad=True)",
         'bn': "dict(type='BN', requires_grad=True)"}
#: The comparisons: (row, (run a), (run b)); a run is (norm, ranks, tag).
COMPARISONS = [
    ('(a) 2 x 2 emulated SyncBN vs 1 x 2 x 2 SyncBN (reverted: per-micro-batch BN)',
     ('emulated', 2, ''), ('syncbn', 1, '')),
    ('(b) 2 x 2 BN vs 1 x 2 x 2 BN', ('bn', 2, ''), ('bn', 1, '')),
    ('(c) 2 x 2 emulated SyncBN vs the same run again', ('emulated', 2, ''),
     ('emulated', 2, '-rerun')),
]
BUFFERS = ('running_mean', 'running_var', 'num_batches_tracked')


class SyncBNRuns:
    """Runs by (model, norm, ranks, tag), trained on first use in ``root``."""

    def __init__(self, root: str, data_root: str) -> None:
        self.root, self.data_root = root, data_root
        self._done: Dict[Tuple[str, str, int, str], str] = {}

    def get(self, model: str, norm: str, ranks: int, tag: str = '') -> str:
        """Work dir of ``model`` with ``norm`` on ``ranks`` x 2 (1 rank: x 2 accumulated)."""
        from support.dist_utils import dist_train
        from support.repro_utils import pythonpath, run_train, write_config
        key = (model, norm, ranks, tag)
        if key not in self._done:
            name = f'{model}-{norm}-{ranks}r{tag}'
            path = osp.join(self.root, f'cfg-{name}', 'cfg.py')
            fields = dict(norm=NORMS[norm], micro=3 - ranks)
            if model == 'rtmdet':
                os.makedirs(osp.dirname(path), exist_ok=True)
                with open(path, 'w') as f:
                    f.write(RTMDET.format(base=osp.join(REPO, 'configs', 'zoo', 'rtmdet.py'),
                                          **fields))
            else:
                write_config(path, 'retinanet', self.data_root, extra=RETINANET.format(**fields),
                             num_workers=0, max_epochs=2)
            work_dir = osp.join(self.root, name)
            if ranks == 1:
                run_train(path, work_dir, env={'PYTHONPATH': pythonpath(
                    osp.join(REPO, 'tests')), 'OMP_NUM_THREADS': '1'})
            else:
                dist_train(path, work_dir, nproc=ranks)
            self._done[key] = work_dir
        return self._done[key]


def compare(path_a: str, path_b: str) -> Dict[str, Tuple[int, int, float]]:
    """{'parameters' / 'BN buffers': (identical tensors, tensors, ||a - b|| / ||a||)}.

    ``BN buffers`` are the running means and variances and ``num_batches_tracked``
    (whose count is included, not its norm); everything else of the ``state_dict`` is a
    parameter.
    """
    from mmrepro.resume.checkpoint_io import safe_load
    a, b = safe_load(path_a)['state_dict'], safe_load(path_b)['state_dict']
    found = {}
    for part in ('parameters', 'BN buffers'):
        names = [n for n in a if n.endswith(BUFFERS) == (part == 'BN buffers')]
        same = sum(bool(torch.equal(a[n], b[n])) for n in names)
        floats = [n for n in names if a[n].dtype.is_floating_point]
        flat_a = torch.cat([a[n].double().flatten() for n in floats])
        flat_b = torch.cat([b[n].double().flatten() for n in floats])
        found[part] = (same, len(names), float((flat_a - flat_b).norm() / flat_a.norm()))
    return found


def main() -> None:
    """Check the emulation, train every run, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--data', default=None, help='the demo data (made in a temp dir)')
    parser.add_argument('--models', nargs='+', default=['rtmdet', 'retinanet'],
                        choices=['rtmdet', 'retinanet'])
    args = parser.parse_args()
    sys.path[:0] = [REPO, osp.join(REPO, 'tests')]  # mmrepro and the suite's helpers
    from support.repro_utils import checkpoint, pythonpath

    from mmrepro.checks.matrix.run import DATA_ENV
    from mmrepro.demo import make_tiny_coco
    root = tempfile.mkdtemp(prefix='mmrepro-syncbn-')
    data = make_tiny_coco(args.data or osp.join(root, 'data'))['root']
    os.environ[DATA_ENV] = osp.join(osp.abspath(data), '')
    os.environ['PYTHONPATH'] = pythonpath(BENCH)  # for custom_imports, in every run
    print(f'# SyncBN across layouts of global batch 4, '
          f'{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC\n')
    print('The emulation: one EmulatedSyncBN layer on 2 gloo ranks x 2 images vs '
          'nn.BatchNorm2d over the 4 images, two training steps:\n')
    print('| quantity | max abs difference / max abs value |')
    print('|---|---:|')
    for name, value in check_emulation().items():
        print(f'| {name} | {value:.1e} |')
    runs = SyncBNRuns(root, data)
    for model in args.models:
        print(f'\n{model}, 8 optimizer steps:\n')
        print('| runs compared | identical parameters | parameters, relative (L2) | '
              'identical BN buffers | BN running stats, relative (L2) |')
        print('|---|---:|---:|---:|---:|')
        for label, run_a, run_b in COMPARISONS:
            found = compare(checkpoint(runs.get(model, *run_a)),
                            checkpoint(runs.get(model, *run_b)))
            cells: List[str] = []
            for same, total, diff in found.values():
                cells += [f'{same}/{total}', f'{diff:.2e}']
            print(f'| {label} | {" | ".join(cells)} |')


if __name__ == '__main__':
    main()
