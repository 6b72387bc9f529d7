"""`python -m common.train TASK [options]`: `sitp train TASK [options]` (common/cli.py)."""

import sys

from common.cli import main

sys.exit(main(["train", *sys.argv[1:]]))
