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

    It stays in ``sys.meta_path`` (removing it while another thread walks the list
    could make that walk skip a finder) and answers nothing once the names are added.
    Finders are called under the global import lock.
    """

    def __init__(self) -> None:
        self.done = False
        self._searching = False

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Any:
        if fullname != MODULE or self.done or self._searching:
            return None
        self._searching = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        loader = getattr(spec, 'loader', None)
        if loader is None or not hasattr(loader, 'exec_module'):
            return spec

        def exec_module(module: ModuleType) -> None:
            try:
                type(loader).exec_module(loader, module)
            finally:  # a loader may serve other modules (a zip): wrap this one only
                del loader.exec_module
            _add_names(module)
            self.done = True
        loader.exec_module = exec_module
        return spec


def apply() -> None:
    """Add ``init_random_seed`` and ``set_random_seed`` to ``mmdet.apis`` if missing."""
    if MODULE in sys.modules:
        _add_names(sys.modules[MODULE])
    elif importlib.util.find_spec('mmdet') is not None and not any(
            isinstance(f, _AddNamesOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AddNamesOnImport())
