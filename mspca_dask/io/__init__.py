"""Input and output: open data sources lazily, write results atomically, keep data safe.

This package owns every contact with Zarr, xarray and fsspec; it does no numerical work.

* :mod:`~mspca_dask.io.sources`: :func:`open_source` (arrays, sparse matrices, xarray
  objects and Zarr stores as a lazy :class:`Source`), :class:`ZarrChunkReader`, and the
  cheap recognition of genotype inputs (:func:`is_genotype_source`).
* :mod:`~mspca_dask.io.anndata`: AnnData objects, ``.h5ad`` files and AnnData Zarr stores
  read lazily (:func:`~mspca_dask.io.anndata.open_anndata`), and a result stored back as
  scanpy stores its PCA (:func:`add_to_anndata`).
* :mod:`~mspca_dask.io.chunks`: :class:`~mspca_dask.io.chunks.ChunkDecoder`, whole chunks of
  a Zarr format 2 array decoded straight into a buffer the caller reuses.
* :mod:`~mspca_dask.io.writing`: :func:`write_dataset_atomic` and :func:`commit_directory`
  (the one atomic commit), :func:`open_dataset_checked` and :func:`is_complete`.
* :mod:`~mspca_dask.io.safety`: where an output may go, whose data a path holds, and
  whether every chunk of a store is present.
* :mod:`~mspca_dask.io.urls`: the one rule for "is this a URL?" (:func:`is_url`).

Examples
--------
>>> import numpy as np
>>> from mspca_dask.io import open_source
>>> open_source(np.ones((4, 3))).data.shape
(4, 3)
"""

from __future__ import annotations

from .anndata import add_to_anndata
from .sources import (
    GENOTYPE_VARIABLES,
    Source,
    ZarrChunkReader,
    is_genotype_source,
    is_vcf_zarr,
    open_source,
    plink_fileset,
)
from .urls import is_url, local_path
from .writing import (
    COMPLETE_ATTR,
    commit_directory,
    is_complete,
    open_dataset_checked,
    write_dataset_atomic,
)

__all__ = [
    "COMPLETE_ATTR",
    "Source",
    "open_source",
    "write_dataset_atomic",
    "open_dataset_checked",
    "is_complete",
    "commit_directory",
    "ZarrChunkReader",
    "is_url",
    "local_path",
    "GENOTYPE_VARIABLES",
    "plink_fileset",
    "is_vcf_zarr",
    "is_genotype_source",
    "add_to_anndata",
]
