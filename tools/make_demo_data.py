#!/usr/bin/env python
"""Generate the tiny COCO-format demo dataset: python tools/make_demo_data.py [ROOT]."""
import argparse
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.demo.tiny_coco import make_tiny_coco  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('root', nargs='?', default='data/demo', help='output directory')
    parser.add_argument('--num-train', type=int, default=16)
    parser.add_argument('--num-val', type=int, default=8)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    paths = make_tiny_coco(args.root, args.num_train, args.num_val, args.seed)
    print(f"demo data ready: {paths['root']}")


if __name__ == '__main__':
    main()
