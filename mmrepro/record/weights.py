"""The digests of a run's weights: each checkpoint's and the final one (the ledger).

The weights digest itself (sha256 of ``state_dict`` and ``ema_state_dict`` by name,
dtype, shape and bytes) is defined with the other digests a checkpoint holds, in
:mod:`mmrepro.resume.digests`. ``ReproducibilityHook`` writes it into every checkpoint's
``meta['weights_sha256']`` and into the run record's ``weights`` section
(:class:`WeightsLedger`), and logs it at the end of training; ``mmrepro-digest`` prints it
for any checkpoint, one written without mmrepro included.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from ..resume.digests import META_KEY, section_names, weights_digest

#: The run record's section of digests (``{'checkpoints': {iter: digest}, 'final': ...}``).
RECORD_KEY = 'weights'


class WeightsLedger:
    """The digests of one run's checkpoints and final weights (kept by rank 0).

    ``ReproducibilityHook`` calls :meth:`saving` for every checkpoint and
    :meth:`final` when training ends; :meth:`section` is the run record's ``weights``.
    """

    def __init__(self) -> None:
        self.checkpoints: Dict[int, str] = {}
        self.covers = 'state_dict'
        self.final_digest: Optional[Dict[str, Any]] = None

    def saving(self, checkpoint: Dict[str, Any], digest: Optional[str] = None) -> str:
        """Keep the weights digest of the checkpoint being written and put it in its meta.

        Args:
            checkpoint: The checkpoint being written.
            digest: Its weights digest where already computed
                (:func:`mmrepro.resume.digests.seal`); computed here otherwise.
        """
        digest = weights_digest(checkpoint) if digest is None else digest
        self.covers = section_names(checkpoint)
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
