"""The bundled demo: a tiny COCO-format detection dataset generated on the fly."""
from .tiny_coco import CLASSES, make_tiny_coco

__all__ = ['CLASSES', 'make_tiny_coco']
