#!/usr/bin/env python
"""Measure which MMDetection families train bit-exactly. See README.md, "Support matrix"."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.support_matrix import main  # noqa: E402

if __name__ == '__main__':
    sys.exit(main())
