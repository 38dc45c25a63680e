"""The Runner's hooks: ``ReproducibilityHook`` where missing, mmrepro's subclasses of
MMEngine's checkpoint and scheduler hooks where the config asks for MMEngine's.

``ReproRunner.register_hooks`` adds ``ReproducibilityHook`` to ``custom_hooks`` when the
config does not list it, and logs that it did (:func:`repro_custom_hooks`): the hook writes
the RNG states and data position that exact resume needs.

Where ``default_hooks`` or ``custom_hooks`` ask for MMEngine's ``CheckpointHook`` or
``ParamSchedulerHook`` (by type name or class, or by leaving the default entry to
MMEngine), the Runner builds :class:`~mmrepro.runner.checkpoints.ReproCheckpointHook`
or :class:`~mmrepro.runner.schedules.ReproParamSchedulerHook` with the same arguments.
A ``default_hooks`` entry of another type (a hook of the user's) is kept, and the log
says what it lacks (:func:`repro_default_hooks`).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from mmengine.hooks import CheckpointHook, ParamSchedulerHook
from mmengine.runner import Runner

from ..run.enable import enable_in_config
from .checkpoints import ReproCheckpointHook
from .requested import asks_for_class, type_name
from .schedules import ReproParamSchedulerHook

#: ``default_hooks`` key: (MMEngine's hook, mmrepro's, MMEngine's default arguments,
#: what a hook of another type lacks).
DEFAULT_HOOKS = {
    'checkpoint': (CheckpointHook, ReproCheckpointHook, dict(interval=1),
                   '`last_checkpoint` is written in place, not atomically'),
    'param_scheduler': (ParamSchedulerHook, ReproParamSchedulerHook, {},
                        'under accumulative_counts, iteration-based schedules step per '
                        'micro-batch, not per optimizer step'),
}


def ours(entry: Any) -> Any:
    """A hook config asking for MMEngine's checkpoint or scheduler hook, asking for
    mmrepro's instead; any other entry as it is."""
    if not isinstance(entry, dict):
        return entry
    kind = entry.get('type')
    for theirs, mine, _, _ in DEFAULT_HOOKS.values():
        if asks_for_class(kind, theirs):
            return dict(entry, type=mine.__name__)
    return entry


def repro_custom_hooks(runner: Runner, hooks: Optional[List]) -> Optional[List]:
    """The ``custom_hooks`` to register: ``ReproducibilityHook`` added where missing (the
    log says so), and MMEngine's checkpoint and scheduler hooks asked for as mmrepro's."""
    _, listed, added = enable_in_config(None, hooks)  # the hooks only
    if added:
        hooks = listed
        if runner.cfg.get('custom_imports') is not None:
            runner.cfg['custom_hooks'] = hooks  # the config dump records it
        runner.logger.info(
            'mmrepro: added ReproducibilityHook to custom_hooks: the config enables '
            'mmrepro (custom_imports) without listing it, and exact resume needs the '
            'RNG states and data position it writes into checkpoints.')
    return None if hooks is None else [ours(h) for h in hooks]


def repro_default_hooks(runner: Runner, hooks: Optional[Dict]) -> Dict:
    """The ``default_hooks`` to register, with mmrepro's hooks (see the module); the log
    says what an entry of another type lacks."""
    hooks = dict(hooks or {})
    for key, (theirs, mine, defaults, lacks) in DEFAULT_HOOKS.items():
        entry = ours(hooks.get(key, dict(type=theirs.__name__, **defaults)))
        hooks[key] = entry
        kind = entry.get('type') if isinstance(entry, dict) else type(entry)
        if entry is not None and not (kind == mine.__name__ or (
                isinstance(kind, type) and issubclass(kind, mine))):
            runner.logger.log(logging.WARNING, (
                f'mmrepro: default_hooks.{key} is {type_name(kind)}, '
                f'not {mine.__name__}: {lacks}'))
    return hooks
