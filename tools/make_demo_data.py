#!/usr/bin/env python
"""Write the tiny COCO-format demo dataset. See docs/tools.md."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.make_demo_data import main  # noqa: E402

if __name__ == '__main__':
    sys.exit(main())
