"""mmcv's rotated ops (mmrotate's R3Det, Oriented R-CNN, ReDet) with backward passes
without atomics: ``roi_align_rotated``, ``riroi_align_rotated`` and
``rotated_feature_align`` (``functions.py``), their sampling geometry
(``geometry.py``), the entries and sums of their backward (``kernels.py``) and its
Triton kernels (``triton_rotated.py``). Models reach them through the routers of
:mod:`mmrepro.ops.routing`.
"""
from .functions import riroi_align_rotated, roi_align_rotated, rotated_feature_align

__all__ = ['riroi_align_rotated', 'roi_align_rotated', 'rotated_feature_align']
