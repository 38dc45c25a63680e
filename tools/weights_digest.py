#!/usr/bin/env python
"""Print the weights digest of checkpoints (mmrepro-digest). See README.md."""
import os.path as osp
import sys

sys.path.insert(0, osp.dirname(osp.dirname(osp.abspath(__file__))))

from mmrepro.cli.weights_digest import main  # noqa: E402

if __name__ == '__main__':
    sys.exit(main())
