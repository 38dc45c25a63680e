"""mmrepro's configs, as an OpenMMLab package ships them (``mmrepro::path``).

The repository's ``configs/`` is installed inside the package as ``mmrepro/.mim/configs``
(a link in the checkout; copied into wheels), which is where MMEngine's
``package::path`` lookup reads. MMEngine accepts only the packages named in
``mmengine.config.utils.MODULE2PACKAGE``; :func:`register` adds ``mmrepro`` there when
mmrepro is imported (by ``mmrepro-train``, ``tools/train.py`` or any script that
imports it before reading a config), so that a config anywhere can say::

    _base_ = ['mmrepro::_base_/repro_runtime.py']
"""
from __future__ import annotations

import os.path as osp

__all__ = ['CONFIG_ROOT', 'register']

#: The package's configs (``mmrepro::`` paths are relative to it).
CONFIG_ROOT = osp.join(osp.dirname(osp.abspath(__file__)), '.mim', 'configs')


def register() -> None:
    """Let MMEngine resolve ``mmrepro::`` config paths."""
    from mmengine.config import utils
    utils.MODULE2PACKAGE.setdefault('mmrepro', 'mmrepro')
