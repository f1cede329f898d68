"""Scheduled jobs built on mspca_dask (see pipelines/README.md)."""
