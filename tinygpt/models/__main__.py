"""`python -m tinygpt.models get smollm2`: the model-fetch command line (tinygpt.models.fetch)."""

import sys

from tinygpt.models.fetch import main

sys.exit(main())
