"""mmrepro: bit-exact reproducible training for MMDetection 3.x / MMEngine.

Importing it (``custom_imports=dict(imports=['mmrepro'])``) registers
:class:`ReproRunner` in ``RUNNERS`` (a config that enables mmrepro trains with it:
seeding through :func:`set_random_seed`, every DataLoader's randomness a function of
(seed, epoch, sample), checkpoints saved atomically and loaded safely on every supported
torch), its loop and hooks, ``ReproducibilityHook`` and ``mmrepro_worker_init_fn``, and
lets configs inherit ``mmrepro::`` paths (:mod:`mmrepro.configs`). On CUDA builds of
torch < 2.10 it also sets ``CUBLAS_WORKSPACE_CONFIG`` if unset, before CUDA starts.
See :mod:`mmrepro.patches` for what is patched where no extension point serves.
"""
from .configs import register as register_configs
from .data import make_reproducible, worker_init_fn
from .determinism.mode import prepare_cublas_workspace_config
from .hooks import ReproducibilityHook
from .patches import apply_patches
from .resume.checkpoint_io import CheckpointLoadError, safe_load
from .rng.seeding import init_random_seed, set_random_seed
from .run.settings import RANDOMNESS_DEFAULTS, validate_randomness
from .runner import ReproRunner, ReproRunnerMixin
from .version import __version__

# Before the Runner exists: MMDetection's launcher starts CUDA in init_dist, before
# the Runner seeds. Only acts where the installed torch still needs the variable.
prepare_cublas_workspace_config()
apply_patches()
register_configs()

__all__ = [
    'CheckpointLoadError', 'RANDOMNESS_DEFAULTS', 'ReproRunner', 'ReproRunnerMixin',
    'ReproducibilityHook', '__version__',
    'init_random_seed', 'make_reproducible', 'safe_load', 'set_random_seed',
    'validate_randomness', 'worker_init_fn',
]
