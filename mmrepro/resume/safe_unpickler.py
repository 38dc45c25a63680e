"""mmrepro's checkpoint allow-list, and a restricted unpickler for torch without ``safe_globals``.

:func:`allowed_globals` lists the globals an MMEngine/mmrepro checkpoint may contain;
:func:`mmrepro.resume.checkpoint_io.safe_load` allows exactly those on every torch.

torch < 2.6 cannot extend the allow-list of ``torch.load(weights_only=True)`` the way
mmrepro needs (``safe_globals`` arrived in 2.5, its ``(callable, 'module.name')``
entries in 2.6: pytorch#142153), and its fixed list refuses MMEngine's checkpoints
(``HistoryBuffer``, numpy arrays). There,
:func:`mmrepro.resume.checkpoint_io.safe_load` passes this module to ``torch.load`` as its
``pickle_module``: an unpickler whose ``find_class`` resolves only the globals that
``weights_only=True`` allows (torch's own list) plus mmrepro's allow-list
(:func:`allowed_globals`), by exact name, before anything is
imported. Everything else raises :class:`pickle.UnpicklingError`, as torch's refusal
does. Python's documented way of restricting globals: ``REDUCE``, ``NEWOBJ``,
``BUILD`` and extension codes only ever reach objects that ``find_class`` returned.
"""
from __future__ import annotations

import _compat_pickle
import functools
import importlib
import pickle
import sys
from typing import Any, Dict, List

import numpy as np
import torch

__all__ = ['Unpickler', 'allowed_globals', 'allowed_names', 'has_safe_globals',
           'history_buffer_getattr', 'load', 'torch_load_restricted']

#: Globals that torch's own weights-only unpickler allows in newer releases.
_BUILTINS = ('_codecs.encode', 'torch.device', 'builtins.bytearray', 'builtins.set',
             'builtins.frozenset', 'builtins.complex', 'collections.OrderedDict',
             'collections.Counter')


def history_buffer_getattr(obj: Any, name: str) -> Any:
    """Stand-in for ``builtins.getattr`` while loading: statistics methods only.

    Pickle protocol 2 stores ``HistoryBuffer``'s table of statistics methods
    (``HistoryBuffer.min``, ...) as ``getattr(HistoryBuffer, 'min')``. Allowing the
    real ``getattr`` would let a crafted file reach any attribute of any allowed
    object; this resolves exactly those names and refuses everything else.
    """
    from mmengine.logging.history_buffer import HistoryBuffer
    names = {'min', 'max', 'current', 'mean', *HistoryBuffer._statistics_methods}
    if (obj is HistoryBuffer or isinstance(obj, HistoryBuffer)) and name in names:
        return getattr(obj, name)
    raise pickle.UnpicklingError(
        f'getattr({obj!r:.60}, {name!r}) is not an attribute MMEngine '
        'checkpoints use')


def allowed_globals() -> List[Any]:
    """The non-tensor globals an MMEngine/mmrepro checkpoint may contain."""
    from mmengine.logging.history_buffer import HistoryBuffer
    try:  # numpy 2 (numpy 1.26 has a numpy._core without multiarray)
        from numpy._core import multiarray
    except ImportError:
        from numpy.core import multiarray
    dtypes = [type(np.dtype(name)) for name in (
        'float16', 'float32', 'float64', 'int8', 'int16', 'int32', 'int64', 'uint8',
        'uint16', 'uint32', 'uint64', 'bool')]
    return [HistoryBuffer, multiarray._reconstruct, multiarray.scalar,
            np.ndarray, np.dtype, *dtypes, (history_buffer_getattr, 'builtins.getattr')]


def _qualified(obj: Any) -> str:
    return f'{obj.__module__}.{obj.__qualname__}'


@functools.lru_cache(maxsize=1)
def allowed_names() -> Dict[str, Any]:
    """``'module.name'`` -> object, for every global a checkpoint may hold."""
    from torch import _weights_only_unpickler as wou

    names: Dict[str, Any] = dict(wou._get_allowed_globals())
    for name in _BUILTINS:
        module, _, attr = name.rpartition('.')
        names[name] = getattr(importlib.import_module(module), attr)
    for entry in allowed_globals():
        obj, name = entry if isinstance(entry, tuple) else (entry, _qualified(entry))
        names[name] = obj
    return names


class Unpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only :func:`allowed_names`."""

    def find_class(self, module: str, name: str) -> Any:
        """Return the allowed global ``module.name``; refuse any other.

        Python 2 names (``__builtin__.getattr``, in torch's default protocol 2) are
        mapped to Python 3's first, as ``pickle`` itself does.
        """
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        obj = allowed_names().get(f'{module}.{name}')
        if obj is None:
            raise pickle.UnpicklingError(
                f'Unsupported global: GLOBAL {module}.{name} was not an allowed global '
                'by default.')
        return obj


def load(file: Any, **kwargs: Any) -> Any:
    """``pickle.load`` with :class:`Unpickler` (torch calls it for legacy files)."""
    return Unpickler(file, **kwargs).load()


def has_safe_globals() -> bool:
    """Whether this torch takes mmrepro's allow-list in ``safe_globals`` (2.6+)."""
    from torch.torch_version import TorchVersion
    return (hasattr(torch.serialization, 'safe_globals')
            and TorchVersion(torch.__version__) >= '2.6')


def torch_load_restricted(filename: str, map_location: Any, mmap: bool) -> Any:
    """``torch.load`` through :class:`Unpickler` (for torch without ``safe_globals``)."""
    return torch.load(filename, map_location=map_location, pickle_module=sys.modules[__name__],
                      mmap=mmap)

