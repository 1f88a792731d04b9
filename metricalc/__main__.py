"""``python -m metricalc`` runs the ``metricalc`` command."""

import sys

from metricalc.cli import main

if __name__ == "__main__":
    sys.exit(main())
