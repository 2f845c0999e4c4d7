"""python -m segops: the `segops` command (segops/cli.py)."""

import sys

from .cli import main

sys.exit(main())
