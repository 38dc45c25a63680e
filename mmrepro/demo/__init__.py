"""The bundled demos: tiny detection (COCO format) and segmentation datasets, and the
other codebases' data derived from the detection one."""
from .codebase_data import derive_codebase_data
from .tiny_coco import CLASSES, make_tiny_coco
from .tiny_seg import SEG_CLASSES, make_tiny_seg

__all__ = ['CLASSES', 'SEG_CLASSES', 'derive_codebase_data', 'make_tiny_coco', 'make_tiny_seg']
