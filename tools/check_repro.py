#!/usr/bin/env python
"""Check that a config trains bit-identically twice. See README.md, "My runs differ"."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.check_repro import main  # noqa: E402

if __name__ == '__main__':
    sys.exit(main())
