"""mmrepro: bit-exact reproducible training for MMDetection 3.x / MMEngine.

Importing it (``custom_imports=dict(imports=['mmrepro'])``) routes the Runner's
``randomness`` config through :func:`set_random_seed`, makes every DataLoader's
randomness a function of (seed, epoch, sample), registers ``ReproducibilityHook``
and ``mmrepro_worker_init_fn``, loads checkpoints safely on every supported torch,
and lets configs inherit ``mmrepro::`` paths (:mod:`mmrepro.configs`). On
CUDA builds of torch < 2.10 it also sets ``CUBLAS_WORKSPACE_CONFIG`` if unset, before
CUDA starts.
See :mod:`mmrepro.patches` for exactly what is patched.
"""
from .checkpoint_io import CheckpointLoadError, safe_load
from .configs import register as register_configs
from .data import make_reproducible, worker_init_fn
from .hooks import ReproducibilityHook
from .patches import apply_patches
from .seeding import (
    RANDOMNESS_DEFAULTS,
    init_random_seed,
    prepare_cublas_workspace_config,
    set_random_seed,
    validate_randomness,
)
from .version import __version__

# Before the Runner exists: MMDetection's launcher starts CUDA in init_dist, before
# the Runner seeds. Only acts where the installed torch still needs the variable.
prepare_cublas_workspace_config()
apply_patches()
register_configs()

__all__ = [
    'CheckpointLoadError', 'RANDOMNESS_DEFAULTS', 'ReproducibilityHook', '__version__',
    'init_random_seed', 'make_reproducible', 'safe_load', 'set_random_seed',
    'validate_randomness', 'worker_init_fn',
]
