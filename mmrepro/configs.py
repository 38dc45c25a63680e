"""mmrepro's configs, as an OpenMMLab package ships them (``mmrepro::path``).

The repository's ``configs/`` is installed inside the package as ``mmrepro/.mim/configs``
(a link in the checkout; copied into wheels), which is where MMEngine's
``package::path`` lookup reads. MMEngine accepts only the packages named in
``mmengine.config.utils.MODULE2PACKAGE``, a dict in that module: nothing but code run
in the process can add ``mmrepro`` to it. Two things do, so that a config anywhere can
say::

    _base_ = ['mmrepro::_base_/repro_runtime.py']

- importing mmrepro (:func:`register`), as ``mmrepro-train``, ``tools/train.py`` and
  ``mmrepro-check`` do before they read a config;
- in an environment mmrepro is pip-installed into, the ``.pth`` file the wheel puts in
  site-packages (:data:`PTH_NAME`, holding :data:`PTH_LINE`). Python runs it at start;
  it runs this file alone, without importing mmrepro or anything beyond the standard
  library, and :func:`install_hook` adds ``mmrepro`` to the dict when MMEngine's module
  is first imported. So MMDetection's own ``tools/train.py``, which reads the config
  before its ``custom_imports`` import mmrepro, resolves ``mmrepro::`` too.

This module imports only the standard library (MMEngine inside functions), which is what
lets the ``.pth`` line run it at every interpreter start at no cost.
"""
from __future__ import annotations

import importlib.abc
import os.path as osp
import sys
from types import ModuleType
from typing import Any, Optional, Sequence

__all__ = ['CONFIG_ROOT', 'PTH_LINE', 'PTH_NAME', 'install_hook', 'register']

#: The package's configs (``mmrepro::`` paths are relative to it).
CONFIG_ROOT = osp.join(osp.dirname(osp.abspath(__file__)), '.mim', 'configs')
#: The file a wheel of mmrepro installs at the top of site-packages.
PTH_NAME = 'mmrepro_configs.pth'
#: Its one line: Python executes ``.pth`` lines that start with ``import``. It finds the
#: installed mmrepro without importing it, runs this file as a module of its own name and
#: calls :func:`install_hook`; without mmrepro (uninstalled by hand) it does nothing.
PTH_LINE = (
    "import importlib.util as u, os.path as p; s = u.find_spec('mmrepro'); "
    "f = p.join(p.dirname(s.origin), 'configs.py') if s and s.origin else ''; "
    "m = u.spec_from_file_location('_mmrepro_configs_hook', f) if p.isfile(f) else None; "
    "c = u.module_from_spec(m) if m else None; "
    "m and (m.loader.exec_module(c) or c.install_hook())")

#: The MMEngine module that holds ``MODULE2PACKAGE``.
_TARGET = 'mmengine.config.utils'
#: Marks the finder, whichever copy of this file defined it.
_MARK = '_mmrepro_config_scope'


def _add_scope(module: ModuleType) -> None:
    """Add ``mmrepro`` to ``module.MODULE2PACKAGE`` (MMEngine's ``config.utils``)."""
    packages = getattr(module, 'MODULE2PACKAGE', None)
    if isinstance(packages, dict):
        packages.setdefault('mmrepro', 'mmrepro')


def register() -> None:
    """Let MMEngine resolve ``mmrepro::`` config paths in this process."""
    from mmengine.config import utils
    _add_scope(utils)


class _RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when ``mmengine.config.utils`` is imported, it asks the other
    finders for the module and runs :func:`_add_scope` right after the module executes."""

    _mmrepro_config_scope = True

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Any:
        """The other finders' spec for ``mmengine.config.utils``; ``None`` for any other."""
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if getattr(finder, _MARK, False) or not hasattr(finder, 'find_spec'):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        exec_module = getattr(spec.loader, 'exec_module', None)
        if exec_module is None:
            return spec

        def exec_and_add_scope(module: ModuleType) -> None:
            exec_module(module)
            _add_scope(module)

        try:  # the loader is this import's own object (a new one per spec)
            spec.loader.exec_module = exec_and_add_scope
        except (AttributeError, TypeError):
            pass
        return spec


def install_hook() -> None:
    """Make every later import of MMEngine's config utilities know ``mmrepro::``.

    Imports nothing: cheap enough for interpreter start (the ``.pth`` file). Where MMEngine
    is already imported it adds the scope at once. Idempotent.
    """
    if _TARGET in sys.modules:
        _add_scope(sys.modules[_TARGET])
    if not any(getattr(finder, _MARK, False) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RegisterOnImport())
