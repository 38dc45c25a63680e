"""mmrepro's hooks, registered in MMEngine's root ``HOOKS`` registry."""
from .check_repro_stop_hook import CheckReproStopHook
from .reproducibility_hook import ReproducibilityHook

__all__ = ['CheckReproStopHook', 'ReproducibilityHook']
