"""Deterministic replacements for ops whose CUDA backward passes use atomics."""
from .adaptive_pool import DeterministicAdaptiveAvgPool2d, adaptive_avg_pool2d
from .replace import replace_roi_align
from .roi_align import DeterministicRoIAlign, deterministic_roi_align

__all__ = ['DeterministicAdaptiveAvgPool2d', 'DeterministicRoIAlign', 'adaptive_avg_pool2d',
           'deterministic_roi_align', 'replace_roi_align']
