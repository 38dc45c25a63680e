"""The one entry for configs that enable mmrepro without naming ``ReproRunner``.

README's two lines (``custom_imports`` naming ``mmrepro``, and ``randomness``) select no
Runner class, and MMDetection's ``tools/train.py`` then calls ``Runner.from_cfg(cfg)``;
a Runner built in Python is ``Runner(...)``. Both construct MMEngine's ``Runner``, so
:func:`install` gives ``Runner`` a ``__new__`` (MMEngine's has none) that constructs a
:class:`~mmrepro.runner.ReproRunner` instead where the config or the keyword arguments
enable mmrepro (:func:`~mmrepro.runner.requested.asks_for_mmrepro`). Every other call
constructs what it names, unchanged.

A Runner class of one's own (``runner_type``) that is not a ``ReproRunnerMixin`` gets a
one-line error when its config enables mmrepro: mmrepro's guarantees need its methods.
"""
from __future__ import annotations

from typing import Any

from mmengine.runner import Runner

from .repro_runner import ReproRunner, ReproRunnerMixin
from .requested import asks_for_mmrepro


class RunnerTypeError(TypeError):
    """A config enables mmrepro but names a Runner class without mmrepro's methods."""


def check_runner_type(cfg: Any) -> None:
    """Refuse a config that enables mmrepro and names a Runner class without its methods.

    For the training tool, which checks its inputs before it builds anything; an unknown
    name is left to MMEngine's registry error.

    Raises:
        RunnerTypeError: One line naming the class and the fix.
    """
    kind = cfg.get('runner_type')
    if isinstance(kind, str):
        from mmengine.registry import RUNNERS
        kind = RUNNERS.get(kind)
    if isinstance(kind, type) and kind is not Runner:
        _refuse(kind)


def _refuse(cls: type) -> None:
    """Raise :class:`RunnerTypeError` for ``cls`` unless it has mmrepro's methods."""
    if not issubclass(cls, ReproRunnerMixin):
        name = cls.__name__
        base = cls.__bases__[0].__name__ if issubclass(cls, Runner) else 'Runner'
        raise RunnerTypeError(
            f'runner_type={name!r}: the config enables mmrepro, but {name} lacks '
            f"mmrepro's Runner methods; use runner_type='ReproRunner', or define it as "
            f'class {name}(ReproRunnerMixin, {base}) (from mmrepro import ReproRunnerMixin)')


def _new(cls: type, *args: Any, **kwargs: Any) -> Any:
    """``Runner.__new__``: a ReproRunner where a plain Runner is asked for mmrepro."""
    if not issubclass(cls, ReproRunnerMixin) and asks_for_mmrepro(args, kwargs):
        if cls is not Runner:
            _refuse(cls)
        cls = ReproRunner
    return object.__new__(cls)


def install() -> None:
    """Give MMEngine's ``Runner`` the ``__new__`` of this module (once)."""
    Runner.__new__ = staticmethod(_new)
