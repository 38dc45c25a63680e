"""A digest of a model's weights that teammates can compare in one line.

The ``.pth`` files of two bit-identical runs differ (timestamps, paths, the message
hub), so their ``sha256sum`` differs too. :func:`weights_digest` hashes only what the
model computes with: every tensor of the checkpoint's ``state_dict`` and, where an
``EMAHook`` saved one, its ``ema_state_dict``, each by name, dtype, shape and bytes, in
sorted name order. Equal digests mean equal weights, byte for byte.

``ReproducibilityHook`` writes it into every checkpoint's ``meta['weights_sha256']``
and into the run record's ``weights`` section (:class:`WeightsLedger`), and logs it at
the end of training; ``mmrepro-digest`` prints it for any checkpoint, one written without
mmrepro included.
"""
from __future__ import annotations

import hashlib
from typing import Any, Dict, Mapping, Optional

import torch

#: The checkpoint sections hashed, in this order.
SECTIONS = ('state_dict', 'ema_state_dict')
#: Where a checkpoint's digest goes: ``checkpoint['meta'][META_KEY]``.
META_KEY = 'weights_sha256'
#: The run record's section of digests (``{'checkpoints': {iter: digest}, 'final': ...}``).
RECORD_KEY = 'weights'


class WeightsError(ValueError):
    """A file holds no weights that can be digested."""


def update_digest(digest: Any, name: str, value: Any) -> None:
    """Hash one named value: a tensor by name, dtype, shape and bytes; else its repr."""
    if not torch.is_tensor(value):
        digest.update(f'{name}\0{type(value).__name__}\0{value!r}\n'.encode())
        return
    value = value.detach().to('cpu').contiguous()
    digest.update(f'{name}\0{value.dtype}\0{tuple(value.shape)}\n'.encode())
    if value.numel():
        digest.update(value.reshape(-1).view(torch.uint8).numpy().tobytes())


def weights_digest(checkpoint: Mapping[str, Any]) -> str:
    """sha256 (hex) of a checkpoint's weights, independent of its other content.

    Args:
        checkpoint: A loaded checkpoint (``state_dict`` and, if present,
            ``ema_state_dict`` are hashed) or a bare state dict (every value a tensor).

    Raises:
        WeightsError: Neither a checkpoint with a ``state_dict`` nor a state dict.
    """
    if not isinstance(checkpoint, Mapping):
        raise WeightsError(f'holds a {type(checkpoint).__name__}, not a checkpoint or a '
                           'state dict')
    if isinstance(checkpoint.get('state_dict'), Mapping):
        sections = {k: checkpoint[k] for k in SECTIONS if isinstance(checkpoint.get(k),
                                                                      Mapping)}
    elif checkpoint and all(torch.is_tensor(v) for v in checkpoint.values()):
        sections = {'state_dict': checkpoint}
    else:
        raise WeightsError('has no state_dict (keys: '
                           f'{", ".join(map(str, list(checkpoint)[:6])) or "none"})')
    digest = hashlib.sha256()
    for section, state in sections.items():
        digest.update(f'[{section}]\n'.encode())
        for name in sorted(state, key=str):
            update_digest(digest, str(name), state[name])
    return digest.hexdigest()


def section_names(checkpoint: Mapping[str, Any]) -> str:
    """``state_dict`` or ``state_dict + ema_state_dict``: what the digest covers."""
    if not isinstance(checkpoint.get('state_dict'), Mapping):
        return 'state dict'
    return ' + '.join(k for k in SECTIONS if isinstance(checkpoint.get(k), Mapping))


class WeightsLedger:
    """The digests of one run's checkpoints and final weights (kept by rank 0).

    ``ReproducibilityHook`` calls :meth:`saving` for every checkpoint and
    :meth:`final` when training ends; :meth:`section` is the run record's ``weights``.
    """

    def __init__(self) -> None:
        self.checkpoints: Dict[int, str] = {}
        self.covers = 'state_dict'
        self.final_digest: Optional[Dict[str, Any]] = None

    def saving(self, checkpoint: Dict[str, Any]) -> str:
        """Digest the checkpoint being written, put it in its meta, and keep it."""
        digest, self.covers = weights_digest(checkpoint), section_names(checkpoint)
        meta = checkpoint.setdefault('meta', {})
        meta[META_KEY] = digest
        if isinstance(meta.get('iter'), int):
            self.checkpoints[meta['iter']] = digest
        return digest

    def final(self, runner: Any) -> Dict[str, Any]:
        """The digest of the weights training ended with, as a checkpoint would hold them.

        The last checkpoint's when one was written at the last iteration; otherwise
        the model's state (with EMA hooks' ``before_save_checkpoint`` applied, as a
        save would) is digested now.
        """
        from mmengine.hooks import EMAHook
        from mmengine.model import is_model_wrapper
        from mmengine.runner.checkpoint import weights_to_cpu
        iteration = runner.iter
        digest, covers = self.checkpoints.get(iteration), self.covers
        if digest is None:
            model = runner.model.module if is_model_wrapper(runner.model) else runner.model
            checkpoint: Dict[str, Any] = dict(meta={},
                                              state_dict=weights_to_cpu(model.state_dict()))
            for hook in runner.hooks:
                if isinstance(hook, EMAHook):
                    hook.before_save_checkpoint(runner, checkpoint)
            digest, covers = weights_digest(checkpoint), section_names(checkpoint)
        self.final_digest = dict(iter=iteration, sha256=digest, covers=covers)
        return self.final_digest

    def section(self) -> Dict[str, Any]:
        """The run record's ``weights`` section (JSON keys are strings)."""
        return dict(checkpoints={str(k): v for k, v in sorted(self.checkpoints.items())},
                    final=self.final_digest)
