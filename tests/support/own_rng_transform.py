"""A transform that owns its generator, as custom transforms sometimes do."""
import numpy as np
from mmcv.transforms import BaseTransform
from mmdet.registry import TRANSFORMS


@TRANSFORMS.register_module()
class OwnRNGNoise(BaseTransform):
    """Adds pixel noise drawn from ``np.random.default_rng()``, a generator of its own
    seeded from OS entropy: mmrepro cannot key it, so it names it.

    Args:
        scale: Standard deviation of the noise. Defaults to 4.0.
    """

    def __init__(self, scale: float = 4.0) -> None:
        self.scale = scale
        self.rng = np.random.default_rng()

    def transform(self, results: dict) -> dict:
        img = results['img'].astype(np.float32)
        noise = self.rng.normal(0.0, self.scale, img.shape)
        results['img'] = np.clip(img + noise, 0, 255).astype(np.uint8)
        return results
