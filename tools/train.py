#!/usr/bin/env python
"""Train an MMEngine config (MMDetection, MMSegmentation...), reproducibly. See README.md."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.train import main  # noqa: E402

if __name__ == '__main__':
    main()
