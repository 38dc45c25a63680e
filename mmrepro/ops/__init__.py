"""Deterministic replacements for mmcv ops whose CUDA kernels use ``atomicAdd``."""
from .replace import replace_roi_align
from .roi_align import DeterministicRoIAlign, deterministic_roi_align

__all__ = ['DeterministicRoIAlign', 'deterministic_roi_align', 'replace_roi_align']
