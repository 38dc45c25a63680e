#!/usr/bin/env python
"""Cost of recording what a run starts from, beside one training iteration (R50-FPN).

What the run record adds at the start of training, for MMDetection's RetinaNet R50-FPN
(random init, no download), each timed ``--repeats`` times, alternately with one
training iteration of the same model (batch 2 at 1333x800, SGD), in one run:

- the code digests: every ``.py`` file of mmdet, mmengine, mmcv and mmrepro
  (:func:`mmrepro.record.code_digest.package_digests`);
- a pretrained ResNet-50 file (made here from a seed, like torchvision's 98 MB one)
  recorded by its sha256 and the tensors it gives the backbone
  (:func:`mmrepro.record.initial_weights.file_entry`);
- the digest of the model's weights before the first step
  (:func:`mmrepro.record.initial_weights.model_digest`);
- the decode canary: the first 2 training images of the generated demo data decoded,
  annotated and resized to 1333x800 (:func:`mmrepro.record.decoding.decode_canary`).

Each is paid once per run (rank 0, before the first step). Keep the machine otherwise
idle; the intra-op thread count is fixed by ``--threads``.

    python benchmarks/bench_provenance.py [--repeats 3] [--threads 2] [--out FILE.md]
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import torch

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from timing import report  # noqa: E402 (benchmarks/timing.py, next to this script)

CONFIG = 'retinanet/retinanet_r50_fpn_1x_coco.py'


def build(tmp: str):
    """The R50-FPN config, its model, a pretrained R50 file and the demo train dataset."""
    import mmdet
    from mmdet.models.backbones import ResNet
    from mmdet.registry import DATASETS, MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config

    from mmrepro.demo.tiny_coco import make_tiny_coco
    register_all_modules()
    cfg = Config.fromfile(osp.join(osp.dirname(mmdet.__file__), '.mim', 'configs', CONFIG))
    torch.manual_seed(0)
    pretrained = osp.join(tmp, 'resnet50.pth')
    torch.save(ResNet(depth=50).state_dict(), pretrained)
    cfg.model.backbone.init_cfg = None
    model = MODELS.build(cfg.model)
    data = make_tiny_coco(osp.join(tmp, 'data'))
    dataset_cfg = cfg.train_dataloader.dataset
    dataset_cfg.data_root = data['root'] + '/'
    dataset_cfg.ann_file = 'annotations/train.json'
    dataset_cfg.data_prefix = dict(img='images/')
    dataset_cfg.filter_cfg = None
    dataset = DATASETS.build(dataset_cfg)
    return cfg, model, pretrained, dataset


def training_step(model) -> Callable[[], None]:
    """One SGD iteration of ``model`` on 2 random images at 1333x800 with 3 boxes each."""
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
    samples = []
    for _ in range(2):
        sample = DetDataSample(metainfo=dict(img_shape=(800, 1333), pad_shape=(800, 1333),
                                             batch_input_shape=(800, 1344),
                                             scale_factor=(1.0, 1.0)))
        sample.gt_instances = InstanceData(
            bboxes=torch.tensor([[10., 20., 200., 300.], [400., 100., 900., 700.],
                                 [50., 500., 300., 780.]]), labels=torch.tensor([1, 2, 3]))
        samples.append(sample)
    inputs = torch.randn(2, 3, 800, 1344)
    model.train()

    def step() -> None:
        losses = model.loss(inputs, samples)
        loss = sum(v if torch.is_tensor(v) else sum(v) for v in losses.values())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--repeats', type=int, default=3, help='timings of each (median)')
    parser.add_argument('--threads', type=int, default=2, help='intra-op threads')
    parser.add_argument('--out', help='also write the table to this Markdown file')
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from mmrepro.record.code_digest import package_digests
    from mmrepro.record.decoding import decode_canary
    from mmrepro.record.initial_weights import file_entry, model_digest
    with tempfile.TemporaryDirectory(prefix='mmrepro-bench-provenance-') as tmp:
        _, model, pretrained, dataset = build(tmp)
        jobs: Dict[str, Callable[[], object]] = {
            'code digests (mmdet, mmengine, mmcv, mmrepro)': package_digests,
            'pretrained ResNet-50 file (sha256, tensors, keys)':
                lambda: file_entry(pretrained, model.backbone),
            'model weights digest before the first step': lambda: model_digest(model),
            'decode canary (2 images to 1333x800)': lambda: decode_canary(dataset, 2),
            'one training iteration (batch 2, 1333x800)': training_step(model),
        }
        times: Dict[str, List[float]] = {name: [] for name in jobs}
        for _ in range(args.repeats):
            for name, job in jobs.items():
                start = time.perf_counter()
                job()
                times[name].append(time.perf_counter() - start)
        files = len(package_digests()['mmdet']['files'])
        size = os.path.getsize(pretrained)
    medians = {name: statistics.median(values) for name, values in times.items()}
    iteration = medians.pop('one training iteration (batch 2, 1333x800)')
    rows = ['| what (once per run) | median | / one iteration |', '|---|---:|---:|']
    for name, seconds in medians.items():
        rows.append(f'| {name} | {seconds * 1e3:.0f} ms | {seconds / iteration:.3f}x |')
    total = sum(medians.values())
    rows.append(f'| **all of it** | **{total * 1e3:.0f} ms** | **{total / iteration:.3f}x** |')
    rows.append(f'| one training iteration (batch 2, 1333x800) | {iteration:.2f} s | 1x |')
    report('Recording what a run starts from (CPU)', args.threads,
           f'median of {args.repeats}, taken alternately; mmdet has {files} Python files, the '
           f'pretrained file is {size / 2**20:.0f} MiB', rows, args.out)


if __name__ == '__main__':
    main()
