"""mmrepro.trace.batching: digests of nested outputs and of data elements."""
import torch

from mmrepro import trace as T
from mmrepro.trace import batching


def test_nested_outputs():
    a, b = torch.randn(4), torch.randn(2, 3)
    base = T.to_hex(batching.digest((a, [b, {'x': a}])))
    assert T.to_hex(batching.digest((a.clone(), [b.clone(), {'x': a.clone()}]))) == base
    changed = b.clone()
    changed[1, 2] = changed[1, 2].nextafter(torch.tensor(10.))
    assert T.to_hex(batching.digest((a, [changed, {'x': a}]))) != base
    assert T.to_hex(batching.digest((a, [b, {'y': a}]))) != base  # keys count
    assert T.to_hex(batching.digest([b, a])) != T.to_hex(batching.digest([a, b]))  # order counts
    assert T.to_hex(batching.digest({'p': a, 'q': b})) == \
        T.to_hex(batching.digest({'q': b, 'p': a}))
    assert batching.digest(None) is None and batching.digest(['text', 3]) is None


def test_data_elements_digest_numbers_not_paths():
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData

    def sample(path, flip, box):
        data = DetDataSample(metainfo=dict(img_path=path, flip=flip, scale_factor=(1.5, 2.0)))
        data.gt_instances = InstanceData(bboxes=torch.tensor([box]), labels=torch.tensor([1]))
        return data

    base = T.to_hex(batching.digest(sample('/a/1.png', False, [1., 2., 3., 4.])))
    assert T.to_hex(batching.digest(sample('/elsewhere/1.png', False, [1., 2., 3., 4.]))) == base
    assert T.to_hex(batching.digest(sample('/a/1.png', True, [1., 2., 3., 4.]))) != base
    assert T.to_hex(batching.digest(sample('/a/1.png', False, [1., 2., 3., 5.]))) != base
