"""Know what a Runner was asked for, however it was built; add the hook where missing.

``Runner.from_cfg`` passes the config both as keyword arguments and as ``cfg``, but a
Runner built in Python with keyword arguments has an empty ``cfg``. So that mmrepro
acts for both, ``Runner.__init__`` records its ``custom_hooks``, ``resume`` and
``load_from`` arguments before MMEngine's own ``__init__`` runs
(:func:`requested_config` reads them with the config).

``Runner.register_hooks`` adds ``ReproducibilityHook`` to ``custom_hooks`` when a
Runner that enables mmrepro (``custom_imports`` naming it) does not list it, and logs
that it did: the hook writes the RNG states and data position that exact resume needs.
"""
from __future__ import annotations

import functools
import inspect
from typing import Any, Dict, List, Optional

from mmengine.runner import Runner

from ..run.enable import enable_in_config
from ..run.state import enabled, run_state

_RECORDED = ('custom_hooks', 'resume', 'load_from')

_original_init = Runner.__init__
_original_register_hooks = Runner.register_hooks
_signature = inspect.signature(_original_init)


@functools.wraps(_original_init)
def __init__(self: Runner, *args: Any, **kwargs: Any) -> None:
    """MMEngine's ``Runner.__init__``, after recording :data:`_RECORDED` arguments."""
    bound = _signature.bind_partial(self, *args, **kwargs)
    run_state(self).init_args = {k: bound.arguments[k] for k in _RECORDED
                                 if k in bound.arguments}
    _original_init(self, *args, **kwargs)


def requested_config(runner: Runner) -> Dict[str, Any]:
    """The Runner's config with its recorded ``__init__`` arguments filled in.

    Keys the config lacks (a Runner built with keyword arguments) come from the
    arguments, so that ``custom_hooks``, ``resume`` and ``load_from`` are seen either way.
    """
    cfg = dict(getattr(runner, 'cfg', None) or {})
    for key, value in run_state(runner).init_args.items():
        if cfg.get(key) is None and value is not None:
            cfg[key] = value
    return cfg


def register_hooks(self: Runner, default_hooks: Optional[Dict] = None,
                   custom_hooks: Optional[List] = None) -> None:
    """``Runner.register_hooks``, adding ``ReproducibilityHook`` where mmrepro needs it."""
    if enabled(self):
        _, hooks, added = enable_in_config(None, custom_hooks)  # the hooks only
        if added:
            custom_hooks = hooks
            if self.cfg.get('custom_imports') is not None:
                self.cfg['custom_hooks'] = custom_hooks  # the config dump records it
            self.logger.info(
                'mmrepro: added ReproducibilityHook to custom_hooks: the config enables '
                'mmrepro (custom_imports) without listing it, and exact resume needs the '
                'RNG states and data position it writes into checkpoints.')
    _original_register_hooks(self, default_hooks, custom_hooks)


def apply() -> None:
    """Install the recording ``__init__`` and :func:`register_hooks` on MMEngine's Runner."""
    Runner.__init__ = __init__
    Runner.register_hooks = register_hooks
