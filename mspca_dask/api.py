"""The public entry point: :func:`fit` (Mean-Shift PCA by Knockoff Mean) and :func:`open_result`.

:func:`fit` checks its arguments, opens the data, plans the fit
(:func:`mspca_dask._engine.plan.make_plan`: solver and passes), runs it pass by pass
(:func:`mspca_dask._engine.run.run_fit`, on an :class:`~mspca_dask._execution.Executor`) and
wraps what it found in an :class:`~mspca_dask.result.MSPCAResult` that records the passes
made.  Only small NumPy arrays — sketches of size ``(n + d) × ℓ`` at most and ``K × K``
results — come back to the driver.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._engine.plan import READ_SECONDS_PER_BYTE, Location, make_plan
from ._engine.run import FitOutput, run_fit
from ._execution import Executor
from ._params import FitParams, check_reference_samples
from ._passes import orient
from .errors import ParameterError
from .io import is_genotype_source, open_source
from .io.safety import check_output_path
from .result import MSPCAResult, open_result

__all__ = ["fit", "open_result"]


def fit(
    source: Any,
    n_components: int = 10,
    *,
    variable: str | None = None,
    sample_dim: str = "samples",
    location: str | np.ndarray | None = "auto",
    solver: str = "auto",
    n_knockoffs: int = 5,
    knockoff_weight: float = 1.0,
    knockoff_factor: float = 2.0,
    threshold_scale: float = 3.0,
    alpha: float = 0.05,
    edge_margin: float = 4.0,
    tol: float | None = None,
    max_passes: int = 40,
    oversampling: int = 10,
    random_state: int | None = 0,
    scheduler: Any = None,
    progress: bool = False,
    allow_missing_chunks: bool = False,
    out: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
    reference_samples: Any = None,
    layer: str | None = None,
    mask_obs: Any = None,
    mask_var: Any = None,
    ld: Mapping[str, Any] | None = None,
) -> MSPCAResult:
    """Mean-Shift PCA: the top principal components, split into covariance and mean-shift ones.

    Parameters
    ----------
    source : array_like, sparse matrix, dask array, xarray DataArray/Dataset, AnnData, or str
        ``(n_samples, n_features)`` data: a NumPy array, a ``scipy.sparse`` CSR or CSC
        matrix, a Dask array (of NumPy or sparse chunks), an xarray object (samples along
        ``sample_dim``), the path / fsspec URL of a Zarr store (v3 or v2; an array, or a
        group with ``variable``), or an ``anndata.AnnData``, ``.h5ad`` file or AnnData Zarr
        store (cells as samples; needs ``pip install 'mspca-dask[anndata]'``).  Samples are
        the observations of the PCA.  Sparse data are densified one chunk at a time inside
        each pass, never whole, and give the same result as the dense array.
    n_components : int
        ``K``, the number of leading eigenpairs examined (1 ≤ K ≤ min(n_samples, n_features)).
    variable : str, optional
        Variable of a Zarr group or xarray Dataset.
    sample_dim : str
        Sample dimension of xarray or labelled Zarr input.
    location : {"auto"}, (n_features,) array_like or None
        What is subtracted from every sample before the analysis.  ``"auto"`` (default): the
        mean of the *inliers*: the largest group of the verdict's mixture in the space of the
        leading scores (the sample mean when the group test finds no displaced group), so that
        a shifted minority cannot drag it.  ``None``: the data as they are (the
        paper's setting: inliers already centred).  A vector: that location (e.g. reference
        allele frequencies).
    solver : {"auto", "exact", "randomized"}
        ``"exact"`` accumulates the smaller Gram matrix in one pass and diagonalises it on the
        driver; ``"randomized"`` runs a block-Krylov iteration whose eigenvalues are certified
        by residual bounds; ``"auto"`` picks the one that a cost model fitted to measured
        timings predicts faster (``benchmarks/results/runtime.md``).
    n_knockoffs : int
        ``B``, the number of independent knockoffs; each statistic is their median.
    knockoff_weight : float
        ``π'`` in ``(0, 1]``: fraction of samples that receive the knockoff shift (paper: 1).
    knockoff_factor : float
        ``θ'² = knockoff_factor · σ² g⁻¹(λ̃₁/σ²)`` (paper: 2).
    threshold_scale : float
        ``C`` in ``ε = C σ² n^{-1/2}``.  The default 3 was calibrated on the paper's mixtures
        (``benchmarks/paper/RESULTS.md``); the paper's own choice ``1/c`` is too tight: with
        it a covariance spike drifts beyond ``ε`` more often at π₁ = 15–20 % (the
        ``paper-rule`` column there).
    alpha : float
        Level of the verdict's tests, in ``(0, 0.5)``: with no displaced group, at most a share
        ``alpha`` of fits declare groups (the group test, ``⌈1/α⌉ − 1`` unimodal twins), and
        each pair's shift test runs at ``alpha`` over the candidates (Bonferroni).  See
        :mod:`mspca_dask.verdict`.
    edge_margin : float
        A candidate spike must exceed the bulk edge by this many Tracy–Widom units (a bulk
        eigenvalue does so with probability ``P(TW₁ > edge_margin)``); the within-group
        covariance's spikes must exceed its own edge by as many.
    tol : float, optional
        Eigenvalue accuracy the randomized solver certifies (default ``0.1 σ² n^{-1/2}``,
        :func:`mspca_dask.rmt.eigenvalue_tolerance`).
    max_passes : int
        Pass budget of the randomized solver; reaching it warns with the bound reached.
    oversampling : int
        Extra columns of the randomized sketch.
    random_state : int or None
        Seed of every random draw (sketch, knockoff directions, memberships).  Results do not
        depend on chunking or on the number of workers.
    scheduler : str, distributed.Client or None
        Where passes run; ``None`` uses the active ``distributed.Client`` if any, else threads.
    progress : bool
        Progress bar per pass (on stderr).
    allow_missing_chunks : bool
        For a Zarr store: read chunks absent from the store as Zarr's fill value.  By
        default a missing chunk (a chunk file deleted or never copied) is a
        :class:`~mspca_dask.errors.ChunkReadError` naming the array and the chunk index,
        found from the store's listing before any pass.  The result records the choice and
        the number of absent chunks (``params["allow_missing_chunks"]``,
        ``params["missing_chunks"]``).
    out : str or os.PathLike, optional
        Also write the result atomically to this Zarr store (local path or fsspec URL).  The
        path is checked *before* the fit: it must not be, lie inside or contain the input
        store, must not exist (unless ``overwrite`` and it holds an mspca result) and its
        directory must be writable.
    overwrite : bool
        With ``out``: replace an existing mspca result there (never other data).
    reference_samples : sequence of str, (n_samples,) bool array or int indices, optional
        Samples known to be inliers (a reference population).  For a genotype ``source`` (the
        path of a VCF Zarr store, or of a PLINK fileset ``x.bed`` / ``x.pgen`` / prefix
        ``x``): the sample ids, or a mask, of the reference set whose allele frequencies
        centre the dosages (the all-sample frequencies scale them; ``location`` must stay
        ``"auto"`` and becomes None).  Genotype sources are QC'd and standardised as by the
        genomics job (:mod:`mspca_dask.genomics.genotypes`; ``params["genotype_qc"]`` holds
        the counts): samples are the observations, variants the features.  For any other
        source: a mask or indices, with ``location`` their centre (a vector, or None when the
        data are centred on it).  Either way the reference rows are held in the inliers' group
        of the verdict's mixture, in the data and in its twins (:mod:`mspca_dask.verdict`).
    layer : str, optional
        For an AnnData source: the layer to analyse; ``None`` analyses ``X`` (as scanpy).
    mask_obs, mask_var : bool array or str, optional
        For an AnnData source: the observations (cells) / variables (genes) to analyse, as a
        boolean mask or the name of a boolean column of ``obs`` / ``var``
        (``mask_var="highly_variable"``), as scanpy's ``mask_obs`` and ``mask_var``.  The
        result's labels are the kept ``obs_names`` and ``var_names``;
        :func:`mspca_dask.add_to_anndata` stores it back in the AnnData.
    ld : mapping, optional
        For a genotype ``source``: LD handling as the genomics job's ``[ld]`` section, e.g.
        ``{"window_kb": 500, "r2": 0.2, "exclude_regions": "hg19"}`` (the semantics of
        ``plink2 --indep-pairwise 500kb 1 0.2`` over the analysed samples, after dropping the
        long-range-LD regions of that build; ``"hg38"``, ``"none"`` or a BED file path also
        work).  ``params["genotype_qc"]`` counts the variants it removed.  None (default):
        no LD handling.

    Returns
    -------
    MSPCAResult
        ``eigenvalues``, ``knockoff_eigenvalues``, ``stable``, ``components`` (the covariance
        PCs), ``mean_shift_components``, ``scores`` and the reason behind every verdict;
        ``passes`` lists the reads of the data the fit made (``params["passes"]``).  It holds
        the top ``n_components`` eigenpairs, then any within-group covariance spikes that
        pairs carrying none pushed out of them (:mod:`mspca_dask.verdict`, item 7).

    Notes
    -----
    Paper, Algorithm 1: with ``X̃`` the data and a knockoff ``X̃' = X̃ + γ'm'ᵀ`` with
    ``θ'² = π'‖m'‖² = 2 g⁻¹(λ̃₁)``, an eigenpair ``(λ̃ᵢ, ũᵢ)`` of ``X̃ᵀX̃/n`` is a covariance
    eigenpair when a knockoff eigenvalue stays within ``ε = C n^{-1/2}``.  The knockoff
    spectra are computed in the same passes and reported (``displacement``,
    ``eigenvector_overlap``); the verdicts come from the model of :mod:`mspca_dask.verdict`
    (a Gaussian mixture in score space, one group test against unimodal twins, a Welch shift
    statistic per pair and the spikes of the within-group covariance).

    Examples
    --------
    >>> from mspca_dask.testing import paper_setting
    >>> model = paper_setting(pi1=0.1, random_state=1)
    >>> res = fit(model.to_numpy(), n_components=4, random_state=0)
    >>> int(res.stable.sum()), int((~res.stable & res.candidate).sum())
    (1, 1)
    """
    params = FitParams.from_kwargs(
        n_components=n_components,
        solver=solver,
        n_knockoffs=n_knockoffs,
        knockoff_weight=knockoff_weight,
        knockoff_factor=knockoff_factor,
        threshold_scale=threshold_scale,
        alpha=alpha,
        edge_margin=edge_margin,
        tol=tol,
        max_passes=max_passes,
        oversampling=oversampling,
        random_state=random_state,
    )
    if out is not None:
        check_output_path(out, overwrite=overwrite, inputs=[source], what="out")
    gin = None
    if is_genotype_source(source, variable):
        # Genotype stores alone need the genomics package (QC, standardised dosages); it is
        # imported here so that the core never imports it otherwise.
        from .genomics.genotypes import genotype_input

        gin = genotype_input(
            source,
            reference_samples=reference_samples,
            location=location,
            variable=variable,
            scheduler=scheduler,
            allow_missing_chunks=allow_missing_chunks,
            ld=ld,
        )
    elif ld is not None:
        raise ParameterError(
            "ld= applies to genotype sources only (a VCF Zarr store or a PLINK fileset path)"
        )
    reference = None
    if gin is not None:
        source, location, variable, sample_dim = gin.data, gin.location, None, "samples"
        reference = gin.reference
    src = open_source(
        source,
        variable=variable,
        sample_dim=sample_dim,
        allow_missing_chunks=allow_missing_chunks,
        layer=layer,
        mask_obs=mask_obs,
        mask_var=mask_var,
    )
    n, d = (int(s) for s in src.data.shape)
    if n_components > min(n, d):
        raise ParameterError(
            f"n_components must be between 1 and min(n_samples, n_features) = {min(n, d)} "
            f"(not {n_components})"
        )
    if gin is None and reference_samples is not None:
        reference = check_reference_samples(reference_samples, n)
    data = orient(src.data)
    read_seconds = READ_SECONDS_PER_BYTE.get(src.kind, 0.0) * src.data.nbytes
    plan = make_plan(
        params,
        Location.resolve(location, d, reference),
        n=n,
        d=d,
        dual=data.dual,
        read_seconds=read_seconds,
    )
    # A client connected here (scheduler="tcp://...") is closed after the fit; an active or
    # handed-in Client is left open.
    with Executor(scheduler=scheduler, progress=progress) as executor:
        output = run_fit(data, plan, executor)
        where, passes = executor.description, list(executor.passes)
    record = dict(
        params.as_dict(),
        variable=variable,
        layer=layer,
        sample_dim=sample_dim,
        location=plan.location.mode,
        solver=plan.solver,
        source=src.description,
        scheduler=where,
        # float32: the thin products ran in float32 BLAS on float32 chunks, summed in float64
        # (their estimated rounding is part of eigenvalue_bounds)
        precision=output.precision,
        allow_missing_chunks=bool(allow_missing_chunks),
        missing_chunks=src.missing_chunks,
        passes=[p.as_dict() for p in passes],
    )
    if gin is not None:  # a genotype store: what its QC kept and dropped
        record["genotype_qc"] = gin.qc_counts
        if ld is not None:
            record["ld"] = dict(ld)
    result = _result(output, plan.solver, len(passes), random_state, record, src)
    if out is not None:
        result.to_zarr(out, overwrite=overwrite)
    return result


def _result(
    out: FitOutput,
    solver: str,
    n_passes: int,
    random_state: int | None,
    params: dict[str, Any],
    src: Any,
) -> MSPCAResult:
    """The :class:`MSPCAResult` of a fit's output, with its provenance and labels."""
    return MSPCAResult(
        eigenvalues=out.eigenvalues,
        knockoff_eigenvalues_all=out.knockoff_eigenvalues_all,
        knockoff_match=out.knockoff_match,
        stable=out.stable,
        candidate=out.candidate,
        reasons=out.reasons,
        displacement=out.displacement,
        eigenvector_overlap=out.eigenvector_overlap,
        shift_z=out.shift_z,
        pair_verdicts=out.verdicts,
        groups=out.groups,
        group_p_value=out.group_p_value,
        group_centre=out.group_centre,
        within_samples=out.within_samples,
        diagnostics=out.diagnostics,
        eigenvalue_bounds=out.eigenvalue_bounds,
        eigenvectors=out.eigenvectors,
        pca_eigenvectors=out.pca_eigenvectors,
        component_variances=out.component_variances,
        scores=out.scores,
        location=out.location,
        noise_variance=out.noise_variance,
        total_variance=out.total_variance,
        threshold=out.threshold,
        knockoff_strength=out.knockoff_strength,
        mp_edge=out.mp_edge,
        n_samples=out.n_samples,
        n_features=out.n_features,
        solver=solver,
        n_passes=n_passes,
        random_state=random_state,
        params=params,
        sample_coords=src.sample_coords,
        feature_coords=src.feature_coords,
        sample_dim=src.sample_dim,
        feature_dim=src.feature_dim,
    )
