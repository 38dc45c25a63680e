"""Give ``mmdet.apis`` back the MMDetection 2.x seeding names for old team scripts.

``mmdet.apis`` imports MMDetection's inferencer and evaluation (about 1.5 s), which a
training process or a command line tool otherwise never needs; so the names are added
when something imports ``mmdet.apis``, or at once if it already has been.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from types import ModuleType
from typing import Any, Optional, Sequence

MODULE = 'mmdet.apis'


def _add_names(apis: ModuleType) -> None:
    from ..rng.seeding import init_random_seed, set_random_seed
    for fn in (init_random_seed, set_random_seed):
        if not hasattr(apis, fn.__name__):
            setattr(apis, fn.__name__, fn)


class _AddNamesOnImport(importlib.abc.MetaPathFinder):
    """Finds ``mmdet.apis`` with the other finders; its module gets the names once run.

    It stays in ``sys.meta_path`` only until ``mmdet.apis`` is first found.
    """

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Any:
        if fullname != MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        run = spec.loader.exec_module  # this module's own loader instance

        def exec_module(module: ModuleType) -> None:
            run(module)
            _add_names(module)
        spec.loader.exec_module = exec_module
        return spec


def apply() -> None:
    """Add ``init_random_seed`` and ``set_random_seed`` to ``mmdet.apis`` if missing."""
    if MODULE in sys.modules:
        _add_names(sys.modules[MODULE])
    elif importlib.util.find_spec('mmdet') is not None and not any(
            isinstance(f, _AddNamesOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AddNamesOnImport())
