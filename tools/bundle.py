#!/usr/bin/env python
"""Pack a run into a baseline bundle (mmrepro-bundle). See README.md."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.bundle import main  # noqa: E402

if __name__ == '__main__':
    sys.exit(main())
