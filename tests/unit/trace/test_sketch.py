"""mmrepro.trace.sketch: distances of tensors from a few numbers each."""
import math

import torch
from mmengine.structures import InstanceData

from mmrepro.trace.sketch import WIDTH, distance, floating, read_back, size, sketch, sketch_of


def test_a_sketch_is_linear_so_its_differences_sketch_the_difference():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(1000, generator=g), torch.randn(1000, generator=g)
    assert sketch(x).shape == (WIDTH,) and sketch(x).dtype == torch.float64
    exact = sketch(x.double() - y.double())  # the difference, not rounded to float32
    assert torch.allclose(sketch(x) - sketch(y), exact, rtol=0, atol=1e-12)
    assert sketch(x).tolist() == sketch(x.clone()).tolist()  # fixed signs
    assert sketch(torch.zeros(7)).tolist() == [0.0] * WIDTH  # padded, any length


def test_the_distance_estimates_the_l2_distance_without_bias():
    g = torch.Generator().manual_seed(1)
    ratios = []
    for n in (100, 1000, 10000, 65537):
        x = torch.randn(n, generator=g)
        noise = torch.randn(n, generator=g) * 1e-7  # a rounding-sized difference
        ratios.append(distance(sketch(x).tolist(), sketch(x + noise).tolist())
                      / noise.double().norm().item())
    assert all(0.4 < r < 1.8 for r in ratios), ratios  # one tensor: about +-30 %
    assert 0.7 < math.sqrt(sum(r * r for r in ratios) / len(ratios)) < 1.3, ratios
    x = torch.randn(4096, generator=g)
    assert abs(size(sketch(x).tolist()) / x.norm().item() - 1) < 0.5


def test_float64_sums_see_a_one_ulp_change_of_float32_values():
    x = torch.randn(100000, generator=torch.Generator().manual_seed(2)) * 100
    nudged = torch.nextafter(x, torch.full_like(x, math.inf))
    assert distance(sketch(x).tolist(), sketch(nudged).tolist()) > 0


def test_nested_outputs_sum_the_sketches_of_their_floating_tensors():
    a, b = torch.ones(3, 4), torch.arange(5.)
    data = InstanceData(bboxes=b.reshape(5, 1))
    out = (a, {'x': b, 'labels': torch.arange(3)}, [data])
    assert [t.shape for t in floating(out)] == [(3, 4), (5,), (5, 1)]  # int tensors skipped
    expected = sketch(a) + sketch(b) + sketch(b.reshape(5, 1))
    assert torch.allclose(sketch_of(out), expected, rtol=0, atol=1e-12)
    assert sketch_of('no tensor').tolist() == [0.0] * WIDTH


def test_read_back_keeps_the_order_and_gives_plain_lists():
    pending = {'b': sketch(torch.ones(3)), 'a': sketch(torch.zeros(3))}
    values = read_back(pending)
    assert list(values) == ['b', 'a'] and values['a'] == [0.0] * WIDTH
    assert values['b'] == pending['b'].tolist()
