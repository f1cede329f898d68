"""``python -m mspca_dask``: the ``mspca`` command (see :mod:`mspca_dask.cli`)."""

from __future__ import annotations

import sys

from .cli import main

# The guard matters: the demo's LocalCluster starts worker processes with the "spawn" method,
# which re-imports this module in every worker.
if __name__ == "__main__":
    sys.exit(main())
