"""``python -m coordinator.cli ...`` = ``shardctl ...``."""
import sys

from coordinator.cli import main

sys.exit(main())
