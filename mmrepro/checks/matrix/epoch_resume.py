"""Resume at every epoch boundary of a short schedule that crosses the switch hooks.

A config is trained for ``epochs`` epochs (a checkpoint at the end of each), with its
switch hooks moved into that schedule: ``PipelineSwitchHook`` switches at epoch
``epochs // 2`` and ``YOLOXModeSwitchHook`` runs the last ``epochs - epochs // 2``
epochs in its final mode. Then the run is resumed from each epoch's checkpoint in
turn and trained to the end, and each final checkpoint is compared with the
uninterrupted run's: the weights (``state_dict``), the EMA weights
(``ema_state_dict``, when an ``EMAHook`` writes one) and the optimizer state, byte for
byte. An iteration-based config is cut into ``epochs`` segments of ``segment``
iterations the same way. Optionally (``mid_epoch``) one more run stops in the middle
of the second epoch, with a checkpoint there, as a crash would, and is resumed from it
to the end. Used by the support matrix (``tools/support_matrix.py``) and the tests.
"""
from __future__ import annotations

import hashlib
import os
import os.path as osp
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import torch

from ...resume.checkpoint_io import safe_load
from ..runs import Run, literal, load_config, train

#: What of a checkpoint is compared, and under which name.
PARTS = (('state_dict', 'weights'), ('ema_state_dict', 'EMA'), ('optimizer', 'optimizer'))

CHILD_CONFIG = """\
# Written by mmrepro's support matrix: {config}
# {epochs} {unit} with a checkpoint after each, switch hooks moved into them.
_base_ = {base!r}
val_dataloader = None
val_cfg = None
val_evaluator = None
train_cfg = {train_cfg}
default_hooks = dict(checkpoint=dict(
    type='CheckpointHook', by_epoch={by_epoch}, interval={interval}, save_last=True,
    max_keep_ckpts=-1, save_best=None))
custom_hooks = {hooks}
"""

#: A run of the child config stopped at iteration ``stop``, with a checkpoint there.
STOP_CONFIG = """\
_base_ = {child!r}
default_hooks = dict(checkpoint=dict(
    type='CheckpointHook', by_epoch=False, interval={stop}, save_last=False,
    max_keep_ckpts=-1, save_best=None))
custom_hooks = {hooks}
"""


@dataclass
class EpochResume:
    """What :func:`run_epoch_resume_check` found.

    Attributes:
        unit: ``'epoch'`` or ``'segment'`` (an iteration-based loop).
        switches: The switch hooks and where they switch, e.g.
            ``['PipelineSwitchHook at epoch 2']``.
        mid: The iteration a run stopped at and resumed from (``mid_epoch``).
        differing: Resumed-from boundary (or ``'iteration N'``) -> the parts of the
            final checkpoint that differ from the uninterrupted run's (``weights``,
            ``EMA``, ``optimizer``).
        parts: The parts compared (``EMA`` only where the checkpoints hold one).
        error: Why the check could not be done (None when it ran).
    """

    unit: str = 'epoch'
    switches: List[str] = field(default_factory=list)
    mid: Optional[int] = None
    differing: Dict[Any, List[str]] = field(default_factory=dict)
    parts: List[str] = field(default_factory=list)
    error: Optional[str] = None

    @property
    def identical(self) -> bool:
        """Every resumed run ended byte-identical to the uninterrupted one."""
        return self.error is None and not self.differing

    def describe(self) -> str:
        """One cell of the support matrix."""
        if self.error:
            return f'error: {self.error}'
        where = ', '.join(self.switches) or 'no switch hook'
        if self.mid:
            where += f'; also from iteration {self.mid}'
        where += f"; {', '.join(self.parts)}"
        if self.identical:
            return f'yes ({where})'
        failed = '; '.join(
            f"from {f'{self.unit} {k}' if isinstance(k, int) else k}: {', '.join(v)} differ"
            for k, v in sorted(self.differing.items(), key=str))
        return f'NO ({failed}; {where})'


def moved_hooks(cfg: Any, epochs: int) -> tuple:
    """``cfg``'s custom hooks with the switch hooks moved; descriptions of the moves."""
    hooks, switches = [], []
    middle = epochs // 2
    for hook in cfg.get('custom_hooks') or []:
        hook = hook.to_dict() if hasattr(hook, 'to_dict') else dict(hook)
        kind = str(hook.get('type', '')).split('.')[-1]  # 'mmdet.PipelineSwitchHook' too
        if kind == 'PipelineSwitchHook':
            hook['switch_epoch'] = middle
            switches.append(f'PipelineSwitchHook at epoch {middle}')
        elif kind == 'YOLOXModeSwitchHook':
            hook['num_last_epochs'] = epochs - middle
            switches.append(f'YOLOXModeSwitchHook at epoch {middle}')
        hooks.append(hook)
    return hooks, switches


def child_config(cfg: Any, config: str, epochs: int, segment: int) -> tuple:
    """The child config's text, the switch hooks it moved, and whether by epoch."""
    hooks, switches = moved_hooks(cfg, epochs)
    by_epoch = 'IterBased' not in str((cfg.get('train_cfg') or {}).get('type', ''))
    train_cfg = (dict(max_epochs=epochs) if by_epoch else
                 dict(max_iters=epochs * segment, val_interval=10**9))
    text = CHILD_CONFIG.format(
        config=config, base=osp.abspath(config), epochs=epochs,
        unit='epochs' if by_epoch else f'segments of {segment} iterations',
        train_cfg=repr(train_cfg), by_epoch=by_epoch, interval=1 if by_epoch else segment,
        hooks=literal(hooks, 'custom_hooks', config))
    return text, switches, by_epoch


def stop_config(cfg: Any, config: str, child: str, epochs: int, stop: int) -> str:
    """A config that trains ``child`` and stops after iteration ``stop``, saved there."""
    hooks = moved_hooks(cfg, epochs)[0] + [dict(type='CheckReproStopHook', max_iters=stop)]
    return STOP_CONFIG.format(child=child, stop=stop,
                              hooks=literal(hooks, 'custom_hooks', config))


def checkpoint_digests(path: str) -> Dict[str, str]:
    """sha256 of each compared part of a checkpoint (tensors by their bytes)."""
    checkpoint = safe_load(path)
    return {name: object_digest(checkpoint[key]) for key, name in PARTS if key in checkpoint}


def object_digest(obj: Any) -> str:
    """sha256 of nested tensors (dtype, shape, bytes), dicts (sorted keys), lists, values."""
    sha = hashlib.sha256()

    def feed(node: Any) -> None:
        if isinstance(node, torch.Tensor):
            node = node.detach().cpu().contiguous()
            sha.update(f'{node.dtype}{tuple(node.shape)}'.encode())
            sha.update(node.reshape(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(node, dict):
            for key in sorted(node, key=str):
                sha.update(repr(key).encode())
                feed(node[key])
        elif isinstance(node, (list, tuple)):
            for item in node:
                feed(item)
        else:
            sha.update(repr(node).encode())
    feed(obj)
    return sha.hexdigest()


def run_epoch_resume_check(config: str, work_dir: str, epochs: int = 4, segment: int = 8,
                           cfg_options: Sequence[str] = (), mid_epoch: bool = False
                           ) -> EpochResume:
    """Train ``config`` ``epochs`` epochs, resume from every epoch and compare the ends.

    Args:
        config: The config file.
        work_dir: Where the runs go (``full``, ``from_1``, ...).
        epochs: Length of the schedule (>= 2).
        segment: Iterations between checkpoints of an iteration-based config.
        cfg_options: ``KEY=VALUE`` overrides for every run.
        mid_epoch: Also stop a run in the middle of the second epoch (segment) and
            resume it from there.

    Returns:
        The result; a run that fails is reported in ``error``, not raised.
    """
    result = EpochResume()
    try:
        cfg = load_config(config, list(cfg_options))
        text, result.switches, by_epoch = child_config(cfg, config, epochs, segment)
        result.unit = 'epoch' if by_epoch else 'segment'
        os.makedirs(work_dir, exist_ok=True)
        child = osp.join(work_dir, 'epoch_resume_config.py')
        with open(child, 'w') as f:
            f.write(text)

        def final(run: str) -> str:
            name = f'epoch_{epochs}.pth' if by_epoch else f'iter_{epochs * segment}.pth'
            return osp.join(work_dir, run, name)
        train(Run('full', f'{epochs} {result.unit}s'), child,
                          work_dir, list(cfg_options))
        reference = checkpoint_digests(final('full'))
        result.parts = list(reference)
        for k in range(1, epochs):
            name = f'epoch_{k}.pth' if by_epoch else f'iter_{k * segment}.pth'
            run = Run(f'from_{k}', f'resumed from {name}',
                                  args=['--resume', osp.join(work_dir, 'full', name)])
            train(run, child, work_dir, list(cfg_options))
            _compare(result, k, reference, final(run.name))
        if mid_epoch:
            first = 'epoch_1.pth' if by_epoch else f'iter_{segment}.pth'
            _run_mid_epoch_check(result, cfg, config, work_dir, child, final, reference,
                             cfg_options, epochs, first)
    except (ValueError, RuntimeError, OSError, KeyError) as err:
        result.error = f'{type(err).__name__}: {str(err).splitlines()[0]}'
    return result


def _compare(result: EpochResume, resumed_from: Any, reference: Dict[str, str],
             path: str) -> None:
    """Note in ``result`` the parts of checkpoint ``path`` that differ from ``reference``."""
    digests = checkpoint_digests(path)
    differ = [part for part in reference if digests.get(part) != reference[part]]
    if differ:
        result.differing[resumed_from] = differ


def _run_mid_epoch_check(result: EpochResume, cfg: Any, config: str, work_dir: str,
                     child: str, final: Any, reference: Dict[str, str],
                     cfg_options: Sequence[str], epochs: int, first: str) -> None:
    """Stop a run in the middle of the second epoch, resume it, compare its end."""
    length = safe_load(osp.join(work_dir, 'full', first))['meta']['iter']  # one epoch
    stop = length + max(length // 2, 1)
    stopped = osp.join(work_dir, 'stop_config.py')
    with open(stopped, 'w') as f:
        f.write(stop_config(cfg, config, child, epochs, stop))
    train(Run('to_mid', f'stopped after iteration {stop}'),
                      stopped, work_dir, list(cfg_options))
    run = Run('from_mid', f'resumed from iter_{stop}.pth', args=[
        '--resume', osp.join(work_dir, 'to_mid', f'iter_{stop}.pth')])
    train(run, child, work_dir, list(cfg_options))
    _compare(result, f'iteration {stop}', reference, final(run.name))
    result.mid = stop
