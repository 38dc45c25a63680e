"""What a Runner was asked for, however it was built: its config and its arguments.

``Runner.from_cfg`` passes the config both as keyword arguments and as ``cfg``, but a
Runner built in Python with keyword arguments has an empty ``cfg``. So that mmrepro
acts for both, :class:`~mmrepro.runner.ReproRunner` records the ``custom_hooks``,
``resume`` and ``load_from`` arguments of its ``__init__`` (:func:`record_init_args`),
and :func:`requested_config` reads them with the config. :func:`asks_for_class` says
whether a config entry asks for one of MMEngine's classes (a loop, a hook, a sampler).
"""
from __future__ import annotations

import inspect
from typing import Any, Dict, Tuple, Type

from mmengine.runner import Runner

from ..run.enable import enabled_by_config
from ..run.state import run_state

#: The ``Runner.__init__`` arguments read besides the config.
RECORDED = ('custom_hooks', 'resume', 'load_from')

_SIGNATURE = inspect.signature(Runner.__init__)


def init_arguments(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """``cfg`` and the :data:`RECORDED` arguments of a ``Runner(...)`` call, by name.

    Args:
        args: The positional arguments after ``self``.
        kwargs: The keyword arguments.
    """
    bound = _SIGNATURE.bind_partial(None, *args, **kwargs).arguments
    return {key: bound[key] for key in ('cfg', *RECORDED) if key in bound}


def merged_config(cfg: Any, arguments: Dict[str, Any]) -> Dict[str, Any]:
    """``cfg`` as a dict, with the keys it lacks (or holds as None) from ``arguments``."""
    merged = dict(cfg or {})
    for key in RECORDED:
        if merged.get(key) is None and arguments.get(key) is not None:
            merged[key] = arguments[key]
    return merged


def asks_for_mmrepro(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> bool:
    """Whether a ``Runner(...)`` call's config or keyword arguments enable mmrepro.

    They do with ``custom_imports`` naming ``mmrepro`` or ``ReproducibilityHook`` in
    ``custom_hooks`` (:func:`mmrepro.run.enable.enabled_by_config`).
    """
    arguments = init_arguments(args, kwargs)
    return enabled_by_config(merged_config(arguments.get('cfg'), arguments))


def record_init_args(runner: Runner, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    """Keep the :data:`RECORDED` arguments of ``runner``'s ``__init__`` in its run state."""
    arguments = init_arguments(args, kwargs)
    run_state(runner).init_args = {key: arguments[key] for key in RECORDED
                                   if key in arguments}


def requested_config(runner: Runner) -> Dict[str, Any]:
    """The Runner's config with its recorded ``__init__`` arguments filled in.

    Keys the config lacks (a Runner built with keyword arguments) come from the
    arguments, so that ``custom_hooks``, ``resume`` and ``load_from`` are seen either way.
    """
    return merged_config(getattr(runner, 'cfg', None), run_state(runner).init_args)


def asks_for_class(kind: Any, cls: Type) -> bool:
    """Whether a config entry's ``type`` asks for MMEngine's class ``cls``.

    A config names it by its registered name (``'EpochBasedTrainLoop'``), by that name
    with MMEngine's scope (``'mmengine.EpochBasedTrainLoop'``) or by the class itself.
    """
    return kind in (cls.__name__, f'mmengine.{cls.__name__}', cls)


def type_name(kind: Any) -> str:
    """A config entry's ``type`` for a message: a class's name, a name as it is."""
    return getattr(kind, '__name__', str(kind))
