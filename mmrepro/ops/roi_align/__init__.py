"""Deterministic RoIAlign: the layer, its plan, and the CUDA path's Triton backward."""
from .layer import DeterministicRoIAlign, deterministic_roi_align

__all__ = ['DeterministicRoIAlign', 'deterministic_roi_align']
