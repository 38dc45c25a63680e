"""Every rank holds the buffers the checkpoint holds: rank 0's, broadcast.

Under ``DistributedDataParallel`` with ``broadcast_buffers=False`` (which mmrepro pins)
each rank keeps its own buffers: BatchNorm's running statistics follow that rank's
batches. The checkpoint keeps rank 0's, so on N ranks a validation ran with N sets of
buffers, and no single checkpoint reproduced it. :func:`broadcast_buffers` copies rank
0's buffers, the model's and every ``EMAHook``'s averaged model's, to every rank.
``ReproducibilityHook`` calls it before every validation and test, and where a checkpoint
is due, so that every rank then holds what the checkpoint holds: validation equals
``tools/test.py`` on the checkpoint, and a resumed run validates as the uninterrupted one.

Training weights do not move: BatchNorm in train mode normalises with the batch's own
statistics and only updates the running ones, and rank 0, whose buffers the checkpoint
keeps, receives nothing. Rank 0's buffers are broadcast, not averaged (MMEngine's
``SyncBuffersHook``, MMDetection's ``SyncNormHook``), because they are what the
checkpoint holds; after those hooks the ranks already agree and nothing changes.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List

import torch


def _modules(runner: Any) -> Iterator[torch.nn.Module]:
    """The model (unwrapped) and every EMA hook's averaged model."""
    from mmengine.model import is_model_wrapper
    model = runner.model
    yield model.module if is_model_wrapper(model) else model
    for hook in getattr(runner, 'hooks', ()):
        ema = getattr(hook, 'ema_model', None)
        if isinstance(ema, torch.nn.Module):
            yield ema


def broadcast_buffers(runner: Any) -> int:
    """Copy rank 0's buffers to every rank; return how many tensors were sent.

    Every rank must call it at the same point (a collective). Buffers are sent in one
    flat tensor per dtype and device. Without a process group, or on one rank, nothing
    is sent.
    """
    from mmengine.dist import broadcast, get_world_size
    if get_world_size() == 1:
        return 0
    groups: Dict[tuple, List[torch.Tensor]] = {}
    for module in _modules(runner):
        for buffer in module.buffers():
            groups.setdefault((buffer.dtype, buffer.device), []).append(buffer)
    sent = 0
    for tensors in groups.values():
        flat = torch.cat([t.detach().reshape(-1) for t in tensors])
        broadcast(flat, src=0)
        offset = 0
        with torch.no_grad():
            for tensor in tensors:
                size = tensor.numel()
                tensor.copy_(flat[offset:offset + size].view_as(tensor))
                offset += size
        sent += len(tensors)
    return sent
