"""A plain MMEngine classifier that compiles in seconds: its model, data and metric,
registered for configs (``custom_imports=dict(imports=['support.tiny_classifier'])``).

The data draw from the global torch and numpy RNGs at every fetch (a flip and noise: the
augmentation), and the model from torch's (dropout) and keeps BatchNorm statistics, so a
run is reproducible only where every RNG is keyed and every state restored.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.evaluator import BaseMetric
from mmengine.model import BaseModel
from mmengine.registry import DATASETS, METRICS, MODELS
from torch import nn

#: Classes, images and image side of :class:`TinyImages`.
CLASSES, IMAGES, SIDE = 4, 32, 16


@DATASETS.register_module()
class TinyImages:
    """``IMAGES`` fixed 3 x ``SIDE`` x ``SIDE`` images of ``CLASSES`` classes; every fetch
    flips one at random (torch) and adds noise (numpy)."""

    def __init__(self, images: int = IMAGES) -> None:
        generator = torch.Generator().manual_seed(0)
        self.labels = torch.arange(images) % CLASSES
        self.images = torch.rand(images, 3, SIDE, SIDE, generator=generator) \
            + self.labels.view(-1, 1, 1, 1) / CLASSES
        self.metainfo: Dict[str, Any] = dict(classes=tuple(range(CLASSES)))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        image = self.images[index]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        noise = torch.from_numpy(np.random.normal(0, 0.1, image.shape).astype(np.float32))
        return dict(inputs=image + noise, data_samples=self.labels[index])


@MODELS.register_module()
class TinyClassifier(BaseModel):
    """Convolution, BatchNorm, ReLU, global pooling, dropout and a linear layer."""

    def __init__(self, channels: int = 8, data_preprocessor: Optional[dict] = None) -> None:
        super().__init__(data_preprocessor=data_preprocessor)
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(channels, CLASSES)

    def forward(self, inputs: torch.Tensor, data_samples: Any = None,
                mode: str = 'tensor') -> Any:
        logits = self.fc(self.drop(F.relu(self.bn(self.conv(inputs))).mean((2, 3))))
        if mode == 'loss':
            return dict(loss=F.cross_entropy(logits, data_samples))
        if mode == 'predict':
            return [dict(label=int(label), pred=int(pred), score=score.detach())
                    for label, pred, score in zip(data_samples, logits.argmax(1), logits,
                                                  strict=True)]
        return logits


@METRICS.register_module()
class TinyAccuracy(BaseMetric):
    """The share of images whose predicted class is their label."""

    def process(self, data_batch: Any, data_samples: List[dict]) -> None:
        self.results += [float(sample['label'] == sample['pred']) for sample in data_samples]

    def compute_metrics(self, results: list) -> Dict[str, float]:
        return dict(accuracy=sum(results) / len(results))


def config_text(compile_line: str = "compile = dict(backend='aot_eager')", workers: int = 2,
                epochs: int = 2, batch: int = 8, extra: str = '') -> str:
    """A config training :class:`TinyClassifier` with mmrepro: ``epochs`` epochs of
    ``IMAGES / batch`` iterations (4 at batch 8; a global batch of 8 on 2 ranks of 4), a
    checkpoint every epoch and every 2 iterations (mid-epoch), test data
    (``tools/test.py``), ``compile_line`` and ``extra``."""
    loader = ("dict(batch_size={batch}, num_workers={workers}, "
              "persistent_workers={persistent}, collate_fn=dict(type='default_collate'), "
              "sampler=dict(type='DefaultSampler', shuffle={shuffle}), "
              "dataset=dict(type='TinyImages'))")
    train = loader.format(batch=batch, workers=workers, persistent=workers > 0, shuffle=True)
    test = loader.format(batch=4, workers=0, persistent=False, shuffle=False)
    return f"""custom_imports = dict(imports=['support.tiny_classifier', 'mmrepro'],
                      allow_failed_imports=False)
default_scope = 'mmengine'
randomness = dict(seed=5, deterministic=True)
model = dict(type='TinyClassifier')
train_dataloader = {train}
# foreach: torch 2.1's dynamo cannot trace the single-tensor SGD's first momentum step
optim_wrapper = dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9, weight_decay=1e-4,
                                    foreach=True))
param_scheduler = [dict(type='MultiStepLR', by_epoch=True, milestones=[1], gamma=0.5)]
train_cfg = dict(by_epoch=True, max_epochs={epochs})
test_dataloader = {test}
test_cfg = dict()
test_evaluator = dict(type='TinyAccuracy')
default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1),
                     logger=dict(type='LoggerHook', interval=1))
custom_hooks = [dict(type='ReproducibilityHook'),
                dict(type='CheckpointHook', by_epoch=False, interval=2, save_last=False)]
log_processor = dict(window_size=1)
{compile_line}
{extra}
"""
