"""Sketches: how far apart two runs' tensors are, from a few numbers per tensor.

A trace's digests say whether two tensors are equal, not how far apart they are. The
rounding envelope (:mod:`mmrepro.checks.envelope`) needs distances, so a traced step
also records a sketch of each weight and applied gradient (and, at the run's first
iteration, of each module's forward output): :data:`WIDTH` numbers per tensor.

The sketch of a tensor of ``n`` values lays them out row by row in ``ceil(n / WIDTH)``
rows of :data:`WIDTH` (zero-padded) and sums the rows, each multiplied by a fixed
pseudo-random sign: ``s_j = sum_i r_i x[i, j]``. It is linear, so the sketch of a
difference is the difference of the sketches, and ``||s(x) - s(y)||^2`` estimates
``||x - y||^2`` without bias (the signs are independent of each other and of the
values); summed over many tensors, the estimate's relative error shrinks. It is summed
in float64, whose own rounding (about ``1e-16`` of the values) lies far below the
float32 rounding it measures (about ``6e-8``).

Sketches are evidence of a distance, never of equality: two runs' tensors are equal
where their digests are, and a distance is only computed where the digests differ.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterator, List, Sequence

import torch
from torch import Tensor

#: Numbers per sketch.
WIDTH = 8
_SEED = 0x5EED  # fixed: sketches of two runs compare only with the same signs
_SIGNS: Dict[torch.device, Tensor] = {}


def _signs(rows: int, device: torch.device) -> Tensor:
    """The first ``rows`` signs (+-1.0, float64) on ``device``; one vector, grown as needed."""
    signs = _SIGNS.get(device)
    if signs is None or signs.numel() < rows:
        size = max(rows, 1 << 12, 2 * (signs.numel() if signs is not None else 0))
        generator = torch.Generator().manual_seed(_SEED)
        bits = torch.randint(0, 2, (size,), generator=generator, dtype=torch.float64)
        signs = _SIGNS[device] = (bits * 2 - 1).to(device)
    return signs[:rows]


def sketch(tensor: Tensor) -> Tensor:
    """The sketch of a floating-point ``tensor``: :data:`WIDTH` float64 values, on its
    device (not read back)."""
    flat = tensor.detach().reshape(-1)
    pad = -flat.numel() % WIDTH
    if pad:
        flat = torch.cat([flat, flat.new_zeros(pad)])
    rows = flat.numel() // WIDTH
    return _signs(rows, flat.device) @ flat.view(rows, WIDTH).double()


def floating(obj: Any) -> Iterator[Tensor]:
    """The floating-point tensors inside ``obj`` (tensors, tuples, lists, dicts and
    MMEngine data elements), in a fixed order."""
    if isinstance(obj, Tensor):
        if obj.is_floating_point() and obj.numel():
            yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from floating(item)
    elif isinstance(obj, dict):
        for key in sorted(obj, key=str):
            yield from floating(obj[key])
    elif hasattr(obj, 'all_items') and callable(obj.all_items):  # BaseDataElement
        for _, value in sorted(obj.all_items(), key=lambda item: item[0]):
            yield from floating(value)


def sketch_of(obj: Any) -> Tensor:
    """The sum of the sketches of every floating-point tensor in ``obj`` (zeros where it
    holds none), on the first tensor's device."""
    parts = [sketch(tensor) for tensor in floating(obj)]
    if not parts:
        return torch.zeros(WIDTH, dtype=torch.float64)
    return torch.stack([part.to(parts[0].device) for part in parts]).sum(0)


def read_back(pending: Dict[str, Tensor]) -> Dict[str, List[float]]:
    """``{name: sketch}`` as plain lists, read with one transfer per device."""
    out: Dict[str, List[float]] = {}
    by_device: Dict[torch.device, List[str]] = {}
    for name, value in pending.items():
        by_device.setdefault(value.device, []).append(name)
    for names in by_device.values():
        values = torch.stack([pending[name] for name in names]).tolist()
        out.update(zip(names, values, strict=True))
    return {name: out[name] for name in pending}


def distance(a: Sequence[float], b: Sequence[float]) -> float:
    """The estimated L2 distance of two tensors from their sketches."""
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)))


def size(a: Sequence[float]) -> float:
    """The estimated L2 norm of a tensor from its sketch."""
    return math.sqrt(sum(x * x for x in a))
