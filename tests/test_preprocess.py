"""Genotype preprocessing: dosages, the statistics pass, reference frequencies, standardisation."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback

import mspca_dask
from mspca_dask.errors import DTypeError, InputError, ParameterError, ShapeError
from mspca_dask.genomics import preprocess as pp


class _CountComputes(Callback):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def _start(self, dsk: object) -> None:
        self.n += 1


def _two_populations(
    n_ref: int = 180,
    n_shift: int = 20,
    d: int = 1500,
    fst: float = 0.1,
    missing: float = 0.01,
    seed: int = 3,
) -> tuple[np.ndarray, np.ndarray]:
    """Balding–Nichols genotypes ``(variants, samples)`` with NaN missing calls."""
    rng = np.random.default_rng(seed)
    p_ref = rng.uniform(0.05, 0.95, d)
    p_shift = rng.beta(p_ref * (1 - fst) / fst, (1 - p_ref) * (1 - fst) / fst)
    g = np.vstack(
        [rng.binomial(2, p_ref, (n_ref, d)), rng.binomial(2, p_shift, (n_shift, d))]
    ).astype(np.float32)
    g[rng.random(g.shape) < missing] = np.nan
    reference = np.r_[np.ones(n_ref, bool), np.zeros(n_shift, bool)]
    return g.T.copy(), reference


# ------------------------------------------------------------------------------ dosages


def test_dosage_from_genotypes__counts_alt_alleles_and_marks_missing() -> None:
    gt = np.array(
        [
            [[0, 0], [0, 1], [1, 1], [-1, -1]],
            [[2, 1], [0, -1], [1, -2], [0, 2]],  # multi-allelic, half-missing, ploidy fill
        ],
        dtype=np.int8,
    )
    out = pp.dosage_from_genotypes(da.from_array(gt, chunks=(1, 3, 1))).compute()
    np.testing.assert_array_equal(out, [[0, 1, 2, np.nan], [2, np.nan, 1, 1]])
    assert out.dtype == np.float32


def test_dosage_from_genotypes__raises_on_wrong_shape_and_dtype() -> None:
    with pytest.raises(ShapeError, match="must be 3-D"):
        pp.dosage_from_genotypes(da.zeros((3, 4), dtype=np.int8))
    with pytest.raises(DTypeError, match="integer allele indices"):
        pp.dosage_from_genotypes(da.zeros((3, 4, 2), dtype=float))


def test_dosage_from_values__treats_nan_and_negative_as_missing() -> None:
    x = da.from_array(np.array([[0.5, np.nan, -1.0, 2.0]]))
    np.testing.assert_array_equal(pp.dosage_from_values(x).compute(), [[0.5, np.nan, np.nan, 2]])


# ------------------------------------------------------------------------------ statistics


@pytest.mark.parametrize("chunks", [(1500, 200), (400, 64), ((700, 13, 787), (150, 1, 49))])
def test_genotype_statistics__matches_numpy_for_any_chunking(chunks: object) -> None:
    g, ref = _two_populations()
    out = dask.compute(pp.genotype_statistics(da.from_array(g, chunks=chunks), ref))[0]
    called = ~np.isnan(g)
    np.testing.assert_allclose(out["alt_sum"], np.nansum(g, axis=1))
    np.testing.assert_array_equal(out["n_called"], called.sum(axis=1))
    np.testing.assert_array_equal(out["sample_n_called"], called.sum(axis=0))
    np.testing.assert_allclose(out["ref_alt_sum"], np.nansum(g[:, ref], axis=1))
    np.testing.assert_array_equal(out["ref_n_called"], called[:, ref].sum(axis=1))


def test_genotype_statistics__reads_the_data_once() -> None:
    g, ref = _two_populations(d=300)
    reads = []

    def load(block: np.ndarray) -> np.ndarray:
        if block.size:  # dask also calls it once on an empty array to learn the output type
            reads.append(block.shape)
        return block

    lazy = da.from_array(g, chunks=(100, 100)).map_blocks(load, dtype=g.dtype)
    with _CountComputes() as counter:
        products = pp.genotype_statistics(lazy, ref)
        assert counter.n == 0, "building the statistics graph must not compute"
        dask.compute(products, scheduler="sync")
    assert len(reads) == lazy.npartitions


def test_genotype_statistics__raises_on_reference_of_wrong_length() -> None:
    with pytest.raises(ShapeError, match="boolean vector over the 4 samples"):
        pp.genotype_statistics(da.zeros((3, 4)), np.ones(5, bool))


def test_genotype_stats__qc_quantities() -> None:
    g = np.array([[0, 1, np.nan, 2], [0, 0, 0, 0]], dtype=np.float32)
    out = dask.compute(pp.genotype_statistics(da.from_array(g), np.array([1, 1, 0, 0], bool)))[0]
    st = pp.GenotypeStats.from_pass(out, n_samples=4)
    np.testing.assert_allclose(st.allele_frequency, [0.5, 0.0])
    np.testing.assert_allclose(st.minor_allele_frequency, [0.5, 0.0])
    np.testing.assert_allclose(st.missing_rate, [0.25, 0.0])
    np.testing.assert_allclose(st.sample_call_rate(), [1, 1, 0.5, 1])
    np.testing.assert_allclose(st.reference_frequency, [(1 + 1) / (2 + 4), 1 / 6])


def test_genotype_stats__reference_frequency_needs_a_reference() -> None:
    out = dask.compute(pp.genotype_statistics(da.ones((2, 3))))[0]
    with pytest.raises(InputError, match="without a reference set"):
        _ = pp.GenotypeStats.from_pass(out, 3).reference_frequency


# ------------------------------------------------------------------------------ frequencies


def test_reference_frequency__stays_inside_the_unit_interval() -> None:
    # absent from the reference, fixed in it, and never called in it
    p = pp.reference_frequency(np.array([0.0, 20.0, 0.0]), np.array([10, 10, 0]))
    np.testing.assert_allclose(p, [1 / 22, 21 / 22, 0.5])
    assert np.all((p > 0) & (p < 1))


def test_patterson_scale__raises_on_monomorphic_frequency() -> None:
    np.testing.assert_allclose(pp.patterson_scale(np.array([0.5])), [np.sqrt(0.5)])
    with pytest.raises(InputError, match="variant index 1 has 0.0"):
        pp.patterson_scale(np.array([0.3, 0.0]))


# ------------------------------------------------------------------------------ standardize


@pytest.mark.parametrize("chunks", [(1500, 200), ((700, 13, 787), (150, 1, 49))])
def test_standardize__matches_dense_reference_and_imputes_with_the_centre(chunks: object) -> None:
    g, ref = _two_populations()
    rng = np.random.default_rng(0)
    p = rng.uniform(0.1, 0.9, g.shape[0])
    centre, scale = 2 * p, pp.patterson_scale(p)
    X = pp.standardize(da.from_array(g, chunks=chunks), centre, scale)
    assert X.shape == (g.shape[1], g.shape[0])  # samples are the rows (observations)
    got = X.compute()
    expected = ((np.where(np.isnan(g), centre[:, None], g) - centre[:, None]) / scale[:, None]).T
    np.testing.assert_allclose(got, expected, atol=1e-12)
    # A missing call is imputed with the centre (the reference mean): exactly 0.
    assert np.all(got[np.isnan(g.T)] == 0.0)


def test_standardize__is_lazy_with_one_task_per_chunk() -> None:
    g, _ = _two_populations(d=400)
    D = da.from_array(g, chunks=(100, 50))
    with _CountComputes() as counter:
        X = pp.standardize(D, np.ones(400), np.ones(400))
    assert counter.n == 0
    assert X.npartitions == D.npartitions
    assert X.chunks == (D.chunks[1], D.chunks[0])


def test_standardize__raises_on_bad_centre_or_scale() -> None:
    D = da.zeros((3, 4))
    with pytest.raises(ShapeError, match=r"centre must have one value per variant, shape \(3,\)"):
        pp.standardize(D, np.zeros(4), np.ones(3))
    with pytest.raises(ParameterError, match="scale must be finite and > 0"):
        pp.standardize(D, np.zeros(3), np.array([1.0, 0.0, 1.0]))
    with pytest.raises(ParameterError, match="centre contains NaN"):
        pp.standardize(D, np.array([0.0, np.nan, 0.0]), np.ones(3))


# ------------------------------------------------------------------------------ the centring fact


def test_reference_centring__lets_the_knockoff_move_and_the_verdict_holds_either_way() -> None:
    """All-sample centring hides the shifted minority from the paper's knockoff (its
    displacement collapses), while the verdict, decided in score space, flags it either way."""
    g, ref = _two_populations()
    D = da.from_array(g, chunks=(500, 100))
    st = pp.GenotypeStats.from_pass(dask.compute(pp.genotype_statistics(D, ref))[0], g.shape[1])
    keep = st.minor_allele_frequency >= 0.05
    verdicts = {}
    moved = {}
    for name, p in (("reference", st.reference_frequency), ("all", st.allele_frequency)):
        pk = p[keep]
        X = pp.standardize(D[keep], 2 * pk, pp.patterson_scale(pk))
        res = mspca_dask.fit(X, n_components=3, location=None, random_state=0)
        verdicts[name] = res.verdicts[0]
        moved[name] = float(res.displacement[0])
        shifted = ~ref
        sep = abs(res.scores[shifted, 0].mean() - res.scores[~shifted, 0].mean())
        assert sep > 5 * res.scores[~shifted, 0].std()  # the top PC is the shifted group
    assert verdicts == {"reference": "mean shift", "all": "mean shift"}
    assert moved["reference"] > 100 * moved["all"]
