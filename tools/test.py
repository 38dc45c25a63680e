#!/usr/bin/env python
"""Test a checkpoint (MMDetection, MMSegmentation...), recorded by mmrepro. See README.md."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.test import console_main  # noqa: E402

if __name__ == '__main__':
    sys.exit(console_main())
