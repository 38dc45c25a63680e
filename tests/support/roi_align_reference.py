"""mmcv's RoIAlign arithmetic transcribed in Python (references for the kernel tests)."""


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
