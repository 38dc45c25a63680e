"""mmrepro's hooks, registered in MMEngine's root ``HOOKS`` registry."""
from .reproducibility_hook import ReproducibilityHook

__all__ = ['ReproducibilityHook']
