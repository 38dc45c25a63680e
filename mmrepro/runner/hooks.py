"""``ReproRunner``'s hooks: ``ReproducibilityHook`` where missing, mmrepro's subclasses of
MMEngine's checkpoint and scheduler hooks where the config asks for MMEngine's.

``ReproRunner.register_hooks`` adds ``ReproducibilityHook`` to ``custom_hooks`` when the
config does not list it, and logs that it did: the hook writes the RNG states and data
position that exact resume needs.

Where ``default_hooks`` or ``custom_hooks`` ask for MMEngine's ``CheckpointHook`` or
``ParamSchedulerHook`` (by type name or class, or by leaving the default entry to
MMEngine), the Runner builds :class:`~mmrepro.runner.checkpoints.ReproCheckpointHook`
or :class:`~mmrepro.runner.schedules.ReproParamSchedulerHook` with the same arguments.
A ``default_hooks`` entry of another type (a hook of the user's) is kept, and the log
says what it lacks.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from mmengine.hooks import CheckpointHook, ParamSchedulerHook

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


class HooksMixin:
    """The Runner's ``register_hooks`` and ``register_default_hooks`` (a part of
    ``ReproRunner``)."""

    def register_hooks(self: Any, default_hooks: Optional[Dict] = None,
                       custom_hooks: Optional[List] = None) -> None:
        """``Runner.register_hooks``, adding ``ReproducibilityHook`` where missing."""
        _, hooks, added = enable_in_config(None, custom_hooks)  # the hooks only
        if added:
            custom_hooks = hooks
            if self.cfg.get('custom_imports') is not None:
                self.cfg['custom_hooks'] = custom_hooks  # the config dump records it
            self.logger.info(
                'mmrepro: added ReproducibilityHook to custom_hooks: the config enables '
                'mmrepro (custom_imports) without listing it, and exact resume needs the '
                'RNG states and data position it writes into checkpoints.')
        custom_hooks = None if custom_hooks is None else [ours(h) for h in custom_hooks]
        super().register_hooks(default_hooks, custom_hooks)

    def register_default_hooks(self: Any, hooks: Optional[Dict] = None) -> None:
        """``Runner.register_default_hooks`` with mmrepro's hooks (see the module)."""
        hooks = dict(hooks or {})
        for key, (theirs, mine, defaults, lacks) in DEFAULT_HOOKS.items():
            entry = ours(hooks.get(key, dict(type=theirs.__name__, **defaults)))
            hooks[key] = entry
            kind = entry.get('type') if isinstance(entry, dict) else type(entry)
            if entry is not None and not (kind == mine.__name__ or (
                    isinstance(kind, type) and issubclass(kind, mine))):
                self.logger.log(logging.WARNING, (
                    f'mmrepro: default_hooks.{key} is {type_name(kind)}, '
                    f'not {mine.__name__}: {lacks}'))
        super().register_default_hooks(hooks)
