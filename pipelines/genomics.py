"""``python -m pipelines.genomics run JOB.toml``: the scheduled genomics MS-PCA job.

The implementation lives in :mod:`mspca_dask.genomics` (installed with the package, so the
same job also runs as ``mspca genomics run JOB.toml`` in a container without this checkout).
See ``pipelines/README.md`` for the config keys, the exit codes and the centring rule.
"""

from __future__ import annotations

import sys

from mspca_dask.genomics import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m pipelines.genomics"))
