"""Which samplers need host RNGs of their own to be reproducible."""
from __future__ import annotations

from typing import Any

#: Samplers and batch samplers known to draw only from their own generator (or
#: none). Matched by exact type: a subclass may add global draws (mmdet's
#: GroupMultiSourceSampler subclasses MultiSourceSampler and uses np.random).
SELF_CONTAINED = frozenset({
    'torch.utils.data.sampler.SequentialSampler',
    'torch.utils.data.sampler.BatchSampler',
    'mmengine.dataset.sampler.DefaultSampler',
    'mmengine.dataset.sampler.InfiniteSampler',
    'mmrepro.data.eval_batch_sampler.EvalBatchSampler',
    'mmdet.datasets.samplers.batch_sampler.AspectRatioBatchSampler',
    'mmdet.datasets.samplers.batch_sampler.TrackAspectRatioBatchSampler',
    'mmdet.datasets.samplers.batch_sampler.MultiDataAspectRatioBatchSampler',
    'mmdet.datasets.samplers.class_aware_sampler.ClassAwareSampler',
    'mmdet.datasets.samplers.multi_source_sampler.MultiSourceSampler',
    'mmdet.datasets.samplers.custom_sample_size_sampler.CustomSampleSizeSampler',
    'mmdet.datasets.samplers.multi_data_sampler.MultiDataSampler',
    'mmdet.datasets.samplers.track_img_sampler.TrackImgSampler',
})


def needs_isolation(batch_sampler: Any) -> bool:
    """True unless the batch sampler and its sampler are all known to be self-contained.

    Isolating costs a save and restore of the host RNG states per batch (numpy's state
    copy dominates), so it is skipped where it cannot matter.
    """
    sampler = getattr(batch_sampler, 'sampler', None)
    parts = [batch_sampler] if sampler is None else [batch_sampler, sampler]
    for part in parts:
        name = f'{type(part).__module__}.{type(part).__qualname__}'
        if name == 'torch.utils.data.sampler.RandomSampler':
            if getattr(part, 'generator', None) is None:
                return True
        elif name not in SELF_CONTAINED:
            return True
    return False
