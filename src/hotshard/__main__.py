"""`python -m hotshard` runs the CLI."""

import sys

from hotshard.cli import main

sys.exit(main())
