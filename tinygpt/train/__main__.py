"""`python -m tinygpt.train ...`: the training command line (tinygpt.train.cli)."""

import sys

from tinygpt.train.cli import main

sys.exit(main())
