"""Evaluate a checkpoint on one or more ranks and dump every image's predictions.

Run as a script (under ``torchrun`` with ``--launcher pytorch`` for several ranks)::

    python tests/support/eval_ranks.py CONFIG CHECKPOINT OUT.json \
        [--mode val|test] [--batch-size B] [--num-workers N] [--loop TYPE]

It builds the config's Runner with ``load_from=CHECKPOINT``, runs ``runner.val()`` (or
``runner.test()``, on the val loader and evaluator), and rank 0 writes ``OUT.json``:
``predictions`` (``img_id`` -> ``bboxes``/``scores``/``labels`` as the hex of their raw
bytes, with dtype and shape, from every rank), ``metrics`` (the dict the loop returned,
floats as ``float.hex``) and ``batches`` (the ``img_id`` of each batch, per rank).
``--loop PlainValLoop``/``PlainTestLoop`` runs MMEngine's loops under a name mmrepro
does not replace (the comparison without mmrepro's evaluation batches).
"""
from __future__ import annotations

import argparse
import json
import os.path as osp
import sys
from typing import Any, Dict, List

sys.path.insert(0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

from mmengine.config import Config  # noqa: E402
from mmengine.dist import all_gather_object, get_rank  # noqa: E402
from mmengine.hooks import Hook  # noqa: E402
from mmengine.registry import LOOPS, RUNNERS  # noqa: E402
from mmengine.runner import Runner, TestLoop, ValLoop  # noqa: E402


@LOOPS.register_module()
class PlainValLoop(ValLoop):
    """MMEngine's ``ValLoop`` under another name (kept as it is by mmrepro)."""


@LOOPS.register_module()
class PlainTestLoop(TestLoop):
    """MMEngine's ``TestLoop`` under another name (kept as it is by mmrepro)."""


def _tensor(value: Any) -> Dict[str, Any]:
    value = value.detach().cpu().contiguous()
    return dict(dtype=str(value.dtype), shape=list(value.shape),
                hex=value.numpy().tobytes().hex())


class PredictionDump(Hook):
    """Keep every image's predictions and each batch's images; rank 0 writes them all."""

    priority = 'LOWEST'

    def __init__(self, out: str) -> None:
        self.out = out
        self.predictions: Dict[str, Any] = {}
        self.batches: List[List[int]] = []

    def _iter(self, outputs: Any) -> None:
        self.batches.append([int(s.img_id) for s in outputs])
        for sample in outputs:
            pred = sample.pred_instances
            self.predictions[str(sample.img_id)] = {
                key: _tensor(getattr(pred, key)) for key in ('bboxes', 'scores', 'labels')}

    def after_val_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self._iter(outputs)

    def after_test_iter(self, runner, batch_idx, data_batch=None, outputs=None) -> None:
        self._iter(outputs)

    def _epoch(self, metrics: Dict[str, Any]) -> None:
        parts = all_gather_object((self.predictions, self.batches))
        if get_rank() != 0:
            return
        predictions: Dict[str, Any] = {}
        for part, _ in parts:
            predictions.update(part)
        floats = {k: float(v).hex() if isinstance(v, (int, float)) else repr(v)
                  for k, v in metrics.items()}
        with open(self.out, 'w') as f:
            json.dump(dict(predictions=predictions, metrics=floats,
                           batches=[b for _, b in parts]), f, indent=1, sort_keys=True)

    def after_val_epoch(self, runner, metrics=None) -> None:
        self._epoch(metrics or {})

    def after_test_epoch(self, runner, metrics=None) -> None:
        self._epoch(metrics or {})


def main(argv: Any = None) -> None:
    """Parse the arguments, evaluate, dump (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('out')
    parser.add_argument('--work-dir', default=None)
    parser.add_argument('--mode', choices=('val', 'test'), default='val')
    parser.add_argument('--batch-size', type=int, default=2)
    parser.add_argument('--num-workers', type=int, default=0)
    parser.add_argument('--loop', default=None, help='the val_cfg/test_cfg type')
    parser.add_argument('--launcher', default='none')
    args = parser.parse_args(argv)
    cfg = Config.fromfile(args.config)
    cfg.work_dir = args.work_dir or osp.join(osp.dirname(osp.abspath(args.out)), 'work')
    cfg.load_from = args.checkpoint
    cfg.launcher = args.launcher
    loader = cfg.val_dataloader
    loader.batch_size = args.batch_size
    loader.num_workers = args.num_workers
    loader.persistent_workers = args.num_workers > 0
    loop = dict(type=args.loop) if args.loop else dict()
    if args.mode == 'test':
        cfg.test_dataloader, cfg.test_evaluator, cfg.test_cfg = loader, cfg.val_evaluator, loop
    else:
        cfg.val_cfg = loop
    runner = (RUNNERS.build(cfg) if 'runner_type' in cfg else Runner.from_cfg(cfg))
    runner.register_hook(PredictionDump(args.out))
    getattr(runner, args.mode)()
    _close(runner)


def _close(runner: Any) -> None:
    """Wait for every rank, then close the process group: a gloo rank that exits with
    its group open (the model wrapper holds it) can abort (as ``tools/train.py`` does)."""
    import gc

    import torch.distributed as torch_dist
    from mmengine.model import is_model_wrapper
    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.barrier()
        if is_model_wrapper(runner.model):
            runner.model = runner.model.module
        gc.collect()
        torch_dist.destroy_process_group()


if __name__ == '__main__':
    main()
