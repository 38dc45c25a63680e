#!/usr/bin/env python
"""Compare two training runs: run records, traces, loss curves. See README.md."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.repro_diff import main  # noqa: E402

if __name__ == '__main__':
    sys.exit(main())
