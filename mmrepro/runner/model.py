"""The model is audited for nondeterministic mmcv ops (``ReproRunner.build_model``)."""
from __future__ import annotations

import logging
from typing import Any

from mmengine.runner import Runner

from ..run.state import log_pending, run_state


def audit(runner: Runner, model: Any) -> Any:
    """The model MMEngine built, audited when deterministic mode is on.

    Every module backed by an mmcv op that is nondeterministic on CUDA is listed in the
    log (and the run record); ``mmcv.ops.RoIAlign`` layers are replaced by
    :class:`mmrepro.ops.DeterministicRoIAlign`. With ``randomness.strict`` a remaining
    one is an error naming the module. The Runner's logger exists from here on, so the
    lines ``set_randomness`` kept (the seed) are logged first.
    """
    state = run_state(runner)
    log_pending(runner)
    if not state.settings.deterministic:
        return model
    from ..ops.op_audit import audit_model, format_audit
    entries = audit_model(model, deterministic=True, strict=state.settings.strict,
                          replace=True)
    state.audit = entries
    remaining = any(e['action'] != 'replaced' for e in entries)
    runner.logger.log(logging.WARNING if remaining else logging.INFO, format_audit(entries))
    return model
