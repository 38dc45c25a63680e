"""mmcv's RoIAlign arithmetic transcribed in Python (references for the kernel tests)."""
import torch


def bilinear_gradient(h, w, y, x, r=float):
    """mmcv's ``bilinear_interpolate_gradient``: four (y, x, weight) corners, or none.

    ``r`` rounds each fraction and weight as the kernel's type does (identity: float64).
    """
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return []
    y, x = max(y, 0.0), max(x, 0.0)
    y_low, x_low = int(y), int(x)
    if y_low >= h - 1:
        y_high = y_low = h - 1
        y = float(y_low)
    else:
        y_high = y_low + 1
    if x_low >= w - 1:
        x_high = x_low = w - 1
        x = float(x_low)
    else:
        x_high = x_low + 1
    ly, lx = r(y - y_low), r(x - x_low)
    hy, hx = r(1.0 - ly), r(1.0 - lx)
    return [(y_low, x_low, r(hy * hx)), (y_low, x_high, r(hy * lx)),
            (y_high, x_low, r(ly * hx)), (y_high, x_high, r(ly * lx))]


def corner_entries(h, w, batch, y, x, r=float):
    """``bilinear_gradient`` as backward entries: [(key, weight)] x 4, key -1 outside."""
    corners = bilinear_gradient(h, w, y, x, r)
    base = batch * h * w
    return [(base + yy * w + xx, wt) for yy, xx, wt in corners] or [(-1, 0.0)] * 4


def entry_tensors(points):
    """``(keys, weights, weights / count)`` of ``[(corner_entries, count)]`` per point."""
    keys = torch.tensor([k for corners, _ in points for k, _ in corners], dtype=torch.int32)
    weights = torch.tensor([w for corners, _ in points for _, w in corners],
                           dtype=torch.float32)
    counts = torch.tensor([c for _, c in points], dtype=torch.float32).repeat_interleave(4)
    return keys, weights, weights * (1.0 / counts)
