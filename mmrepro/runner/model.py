"""The model is audited for nondeterministic mmcv ops (``ReproRunner.build_model``), and
its compilation prepared (``ReproRunner._maybe_compile``)."""
from __future__ import annotations

import logging
from typing import Any

from mmengine.runner import Runner

from ..determinism.compile import apply_settings, backend_name, compile_options, requirements
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


def prepare_compile(runner: Runner) -> None:
    """Before MMEngine compiles ``train_step`` (its ``compile`` setting): what inductor
    needs for exact numbers is set, or the run refused with why
    (:func:`mmrepro.determinism.compile.requirements`); the log says which.

    Raises:
        ValueError: a setting that cannot train exactly in deterministic mode (one line).
    """
    state = run_state(runner)
    options = compile_options(runner.cfg.get('compile'))
    if options is None or not state.enabled:
        return
    first = next(iter(runner.model.parameters()), None)
    needs = requirements(options, state.settings.deterministic,
                         on_cuda=first is not None and first.is_cuda)
    if needs.refusal:
        raise ValueError(needs.refusal)
    apply_settings(needs.sets)
    said = [f'mmrepro: compile: backend {backend_name(options)}, mode '
            f"{options.get('mode') or 'default'}; mmrepro's hooks run outside the compiled "
            'graphs and the trace records no module outputs (they lie inside the graph)']
    said += [f'mmrepro: compile: inductor {key}={value}: {why}' for key, value, why in needs.sets]
    for line in said:
        runner.logger.info(line)
