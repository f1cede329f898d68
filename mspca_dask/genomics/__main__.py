"""``python -m mspca_dask.genomics run JOB.toml``: the genomics command without a checkout."""

from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
