"""``ReproRunner.build_model``: the model is audited for nondeterministic mmcv ops."""
from __future__ import annotations

import logging
from typing import Any

from ..run.state import log_pending, run_state


class ModelMixin:
    """The Runner's ``build_model`` (a part of ``ReproRunner``)."""

    def build_model(self: Any, model: Any) -> Any:
        """``Runner.build_model``, then the mmcv op audit when deterministic mode is on.

        Every module backed by an mmcv op that is nondeterministic on CUDA is listed in
        the log (and the run record); ``mmcv.ops.RoIAlign`` layers are replaced by
        :class:`mmrepro.ops.DeterministicRoIAlign`. With ``randomness.strict`` a
        remaining one is an error naming the module. The Runner's logger exists from
        here on, so the lines ``set_randomness`` kept (the seed) are logged first.
        """
        model = super().build_model(model)
        state = run_state(self)
        log_pending(self)
        if not state.settings.deterministic:
            return model
        from ..ops.op_audit import audit_model, format_audit
        entries = audit_model(model, deterministic=True, strict=state.settings.strict,
                              replace=True)
        state.audit = entries
        remaining = any(e['action'] != 'replaced' for e in entries)
        self.logger.log(logging.WARNING if remaining else logging.INFO, format_audit(entries))
        return model
