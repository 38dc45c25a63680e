"""Audit (and make deterministic) the model right after the Runner builds it."""
from __future__ import annotations

import logging
from typing import Any

from mmengine.runner import Runner

from ..run.state import find_state, log_pending

_original_build_model = Runner.build_model


def build_model(self: Runner, model: Any) -> Any:
    """``Runner.build_model``, then the mmcv op audit when deterministic mode is on.

    Every module backed by an mmcv op that is nondeterministic on CUDA is listed in
    the log (and the run record); ``mmcv.ops.RoIAlign`` layers are replaced by
    :class:`mmrepro.ops.DeterministicRoIAlign`. With ``randomness.strict`` a
    remaining one is an error naming the module. The Runner's logger exists from here
    on, so the lines ``set_randomness`` kept (the seed) are logged first.
    """
    model = _original_build_model(self, model)
    state = find_state(self)
    if state is None or not state.enabled:
        return model
    settings = state.settings
    log_pending(self)
    if not settings.deterministic:
        return model
    from ..ops.op_audit import audit_model, format_audit
    entries = audit_model(model, deterministic=True, strict=settings.strict, replace=True)
    state.audit = entries
    remaining = any(e['action'] != 'replaced' for e in entries)
    self.logger.log(logging.WARNING if remaining else logging.INFO, format_audit(entries))
    return model


def apply() -> None:
    """Install :func:`build_model` on MMEngine's Runner."""
    Runner.build_model = build_model
