"""Lets PyPI's torchvision import beside a CPU-only torch (the current test stack).

PyPI's torchvision wheels are CUDA builds: beside the CPU wheel of torch their C
extension (``torchvision/_C.so``, linked against torch's CUDA libraries) does not load,
and ``torchvision.extension`` says so (``_has_ops()`` is False), as torchvision intends
when its ops are missing. But ``torchvision/_meta_registrations.py`` then registers fake
kernels for ``torchvision::nms`` and ``torchvision::qnms`` without checking, and
``import torchvision`` fails: ``RuntimeError: operator torchvision::nms does not exist``.
MMEngine's ``collect_env`` (every Runner), mmpretrain's transforms and mmpose import it.

``tools/setup_env.sh`` copies this file into the current stack's site-packages with a
``.pth`` line that calls :func:`install_hook` at interpreter start. Only when
``torchvision.extension`` is imported and finds no ops does it define those two
operators' schemas (as the extension would), so the fake registrations succeed; their
kernels stay missing, and ``torchvision.ops.nms`` raises torchvision's own "Couldn't load
custom C++ ops" error, as do its other C ops. Transforms, models and the pure-PyTorch box
functions work. Standard library only at import: the ``.pth`` line costs nothing.
"""
from __future__ import annotations

import importlib.abc
import sys
from importlib.machinery import PathFinder
from types import ModuleType
from typing import Any, Optional, Sequence

#: The module after whose execution the schemas are defined.
TARGET = 'torchvision.extension'
#: The operators ``_meta_registrations.py`` registers unconditionally, as the C
#: extension defines them.
SCHEMAS = ('nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor',
           'qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor')
#: Marks the finder.
_MARK = '_torchvision_without_ops'


def define_missing_schemas(extension: ModuleType) -> None:
    """Define :data:`SCHEMAS` where ``extension`` (``torchvision.extension``) has no ops."""
    if extension._has_ops() or hasattr(extension, _MARK):
        return
    import torch
    library = torch.library.Library('torchvision', 'FRAGMENT')
    for schema in SCHEMAS:
        library.define(schema)
    setattr(extension, _MARK, library)  # the definitions live as long as the library


class _DefineOnImport(importlib.abc.MetaPathFinder):
    """Finds ``torchvision.extension`` where Python's path finder does, and runs
    :func:`define_missing_schemas` right after the module executes."""

    _torchvision_without_ops = True

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Any:
        """The path finder's spec for :data:`TARGET`; ``None`` for any other module."""
        spec = PathFinder.find_spec(fullname, path, target) if fullname == TARGET else None
        exec_module = getattr(spec.loader, 'exec_module', None) if spec else None
        if exec_module is not None:
            def exec_and_define(module: ModuleType) -> None:
                exec_module(module)
                define_missing_schemas(module)

            spec.loader.exec_module = exec_and_define  # the loader is this import's own
        return spec


def install_hook() -> None:
    """Make the next import of ``torchvision`` define the missing schemas. Idempotent."""
    if TARGET in sys.modules:
        define_missing_schemas(sys.modules[TARGET])
    if not any(getattr(finder, _MARK, False) for finder in sys.meta_path):
        sys.meta_path.insert(0, _DefineOnImport())
