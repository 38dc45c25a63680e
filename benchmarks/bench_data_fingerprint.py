#!/usr/bin/env python
"""Cost of the run record's data fingerprint per mode, at COCO scale (118,287 samples).

Writes ``--samples`` image files and as many label maps (sparse files of the given
sizes: no disk space, reads come from the page cache, so ``content`` times are the
hashing cost, a lower bound on a cold disk), then times
:func:`mmrepro.record.fingerprint.data_fingerprint` in each mode over a dataset whose
data infos point to them, as MMSegmentation's do (``img_path``, ``seg_map_path``).

    python benchmarks/bench_data_fingerprint.py [--samples 118287] [--image-kb 160]
        [--label-kb 20] [--dir /tmp/mmrepro-fp] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import os.path as osp
import platform
import statistics
import sys
import time

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))
from mmrepro.record.fingerprint import MODES, data_fingerprint  # noqa: E402


class FileDataset:
    """The parts of an MMEngine dataset the fingerprint reads."""

    def __init__(self, root: str, samples: int) -> None:
        self.data_root = root
        self.ann_file = ''
        self.samples = samples

    def __len__(self) -> int:
        return self.samples

    def get_data_info(self, i: int) -> dict:
        return dict(img_path=osp.join(self.data_root, 'img', f'{i:06d}.jpg'),
                    seg_map_path=osp.join(self.data_root, 'ann', f'{i:06d}.png'),
                    sample_idx=i)


def write_files(root: str, samples: int, image_bytes: int, label_bytes: int) -> None:
    """Sparse files: ``samples`` images and label maps of the given sizes (idempotent)."""
    for sub, size, ext in (('img', image_bytes, 'jpg'), ('ann', label_bytes, 'png')):
        os.makedirs(osp.join(root, sub), exist_ok=True)
        for i in range(samples):
            path = osp.join(root, sub, f'{i:06d}.{ext}')
            if not osp.exists(path) or os.stat(path).st_size != size:
                with open(path, 'wb') as f:
                    f.truncate(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--samples', type=int, default=118287)
    parser.add_argument('--image-kb', type=int, default=160)
    parser.add_argument('--label-kb', type=int, default=20)
    parser.add_argument('--dir', default='/tmp/mmrepro-fp')
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    write_files(args.dir, args.samples, args.image_kb << 10, args.label_kb << 10)
    print(f'{args.samples} images of {args.image_kb} KiB and label maps of '
          f'{args.label_kb} KiB (sparse, page cache) ready in '
          f'{time.perf_counter() - start:.0f} s; {platform.processor() or platform.machine()}, '
          f'{os.cpu_count()} cores; median of {args.rounds} rounds after one warm-up')
    dataset = FileDataset(args.dir, args.samples)
    print('| mode | images by | label maps by | seconds | us per sample |')
    print('|---|---|---|---:|---:|')
    for mode in MODES:
        data_fingerprint(dataset, mode)  # warm-up: the page cache and the stat cache
        times = []
        for _ in range(args.rounds):
            start = time.perf_counter()
            result = data_fingerprint(dataset, mode)
            times.append(time.perf_counter() - start)
        files = result['files']
        seconds = statistics.median(times)
        print(f"| {mode} | {files['img_path']['by']} | {files['seg_map_path']['by']} | "
              f'{seconds:.1f} | {1e6 * seconds / args.samples:.0f} |')


if __name__ == '__main__':
    main()
