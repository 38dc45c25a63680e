"""Give ``mmdet.apis`` back the MMDetection 2.x seeding names for old team scripts."""
from __future__ import annotations

import importlib.util


def apply() -> None:
    """Add ``init_random_seed`` and ``set_random_seed`` to ``mmdet.apis`` if missing."""
    if importlib.util.find_spec('mmdet') is None:
        return
    import mmdet.apis

    from ..rng.seeding import init_random_seed, set_random_seed
    for fn in (init_random_seed, set_random_seed):
        if not hasattr(mmdet.apis, fn.__name__):
            setattr(mmdet.apis, fn.__name__, fn)
