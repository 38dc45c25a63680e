"""A Runner that trains in a second: a linear regressor on noisy inputs; and the stand-in
for a Runner where the code under test reads a few of its attributes only.

Both the data (noise added at each fetch) and the model (dropout) draw from the global
torch RNG, so a run is reproducible only when every RNG is handled.
"""
from __future__ import annotations

import types
import uuid
from typing import TYPE_CHECKING, Any, Dict, List, Optional

import torch
from mmengine.evaluator import BaseMetric
from mmengine.model import BaseModel
from torch import nn

if TYPE_CHECKING:
    from mmrepro.run.settings import RunSettings


class NoisyData:
    """32 fixed inputs; each fetch adds noise from the global torch RNG (augmentation)."""

    def __init__(self) -> None:
        self.x = torch.linspace(-1, 1, 32 * 4).reshape(32, 4)

    def __len__(self) -> int:
        return 32

    def __getitem__(self, index: int) -> dict:
        return dict(inputs=self.x[index] + 0.1 * torch.randn(4))


class Regressor(BaseModel):
    """A linear layer with dropout: the model draws from the global torch RNG too."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)
        self.drop = nn.Dropout(0.3)

    def forward(self, inputs, data_samples=None, mode='tensor'):
        out = self.fc(self.drop(inputs))
        if mode == 'loss':
            return dict(loss=((out - inputs.sum(1, keepdim=True)) ** 2).mean())
        return out


class MeanOutput(BaseMetric):
    """The mean of the model's outputs over the evaluated samples (a toy metric)."""

    def process(self, data_batch: Any, data_samples: Any) -> None:
        self.results += [float(value) for value in torch.as_tensor(data_samples).flatten()]

    def compute_metrics(self, results: list) -> Dict[str, float]:
        return dict(mean_output=sum(results) / len(results))


def evaluating_kwargs(work_dir: Any, checkpoint: str) -> Dict[str, Any]:
    """Keyword arguments of a toy Runner that tests ``checkpoint`` (no training)."""
    kwargs = runner_kwargs(work_dir, [dict(type='ReproducibilityHook')], load_from=checkpoint,
                           test_cfg=dict(), test_evaluator=MeanOutput())
    kwargs['test_dataloader'] = dict(kwargs['train_dataloader'],
                                     sampler=dict(type='DefaultSampler', shuffle=False))
    return kwargs


def runner_kwargs(work_dir: Any, hooks: Optional[List[dict]], **extra: Any) -> Dict[str, Any]:
    """Keyword arguments of a toy Runner: 3 epochs of 8 iterations, seed 3,
    deterministic, a checkpoint every epoch, ``hooks`` as its custom hooks; ``extra``
    adds arguments or replaces these."""
    return {**dict(
        model=Regressor(), work_dir=str(work_dir),
        train_dataloader=dict(dataset=NoisyData(), batch_size=4, num_workers=0,
                              sampler=dict(type='DefaultSampler', shuffle=True),
                              collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.05, momentum=0.9)),
        train_cfg=dict(by_epoch=True, max_epochs=3),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1),
                           logger=dict(type='LoggerHook', interval=100)),
        custom_hooks=hooks, randomness=dict(seed=3, deterministic=True),
        default_scope='mmengine', experiment_name=uuid.uuid4().hex), **extra}


def fake_runner(settings: Optional[RunSettings] = None, **attrs: Any) -> Any:
    """A stand-in for a Runner holding only ``attrs``.

    With ``settings`` (the validated ``randomness``, as ``Runner.set_randomness`` keeps
    them), mmrepro acts for it: its :class:`~mmrepro.run.state.RunState` holds them.
    """
    runner = types.SimpleNamespace(**attrs)
    if settings is not None:
        from mmrepro.run.state import run_state
        run_state(runner).settings = settings
    return runner


def recording_runner(cfg: Any, work_dir: Any, log_dir: Any, dataset: Any,
                     settings: RunSettings) -> Any:
    """The stand-in a run record is collected from: its config, launcher ``none``, a
    fixed timestamp, its directories and its train dataset; enabled with ``settings``."""
    return fake_runner(settings, cfg=cfg, launcher='none', timestamp='20260101_000000',
                       work_dir=str(work_dir), log_dir=str(log_dir),
                       train_dataloader=types.SimpleNamespace(dataset=dataset))
