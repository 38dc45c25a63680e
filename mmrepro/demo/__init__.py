"""The bundled demos: tiny detection (COCO format) and segmentation datasets."""
from .tiny_coco import CLASSES, make_tiny_coco
from .tiny_seg import SEG_CLASSES, make_tiny_seg

__all__ = ['CLASSES', 'SEG_CLASSES', 'make_tiny_coco', 'make_tiny_seg']
