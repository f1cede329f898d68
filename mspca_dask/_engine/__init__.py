"""The driver side of a fit: NumPy only, reading the data through a :class:`PassRunner`.

``plan`` chooses the solver and lays out the passes, ``draws`` makes every random draw from
one seed, ``linalg`` holds the kernels (low-rank operators, Rayleigh–Ritz, error bounds),
``spectra`` computes the spectra by the chosen solver and ``run`` strings them into a fit.
Nothing here imports Dask: the passes are built in :mod:`mspca_dask._passes` and run by
:mod:`mspca_dask._execution`.
"""
