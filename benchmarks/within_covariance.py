"""Which covariance "within the groups" finds the inliers' spikes: pooled, scaled or inliers'.

The verdict's covariance components are the spikes of ``S_w``, the covariance of the data
re-centred at each group's own mean.  The group test's model says the groups' covariances
share one shape *at their own scales* (a batch with more noise, a population of another
diversity); pooling rows of different scales lets the noisier group's own noise make spikes.
This benchmark compares, on the groups the library's fit finds (``mspca_dask.fit(X)``, every
default), three estimates of the inliers' covariance:

* **pooled**: ``X_w = X − Σ_g 1_g μ_gᵀ``, ``S = X_wᵀX_w / n`` (every group's rows as they are);
* **scaled**: each group's centred rows divided by its scale ``s_g`` (the square root of its
  mean within-group variance over that of group 0, the inliers), then pooled: the verdict's
  ``S_w``;
* **inliers**: group 0's rows alone, centred at their mean.

Each estimate's spikes are its top-10 eigenvalues above its candidate line: the
Marchenko–Pastur edge at its own noise level (:func:`mspca_dask.rmt.estimate_noise_variance`
from its trace and top values) plus the library's ``edge_margin`` Tracy–Widom units, with the
rows it holds as the sample count.  Per fit: the number of spikes; the |cos| of each
population spike direction ``u_k`` with its nearest spike (simulated families); the |cos| of
the first spike with the top eigenvector of the main class's covariance (real families);
whether a spike lies at |cos| ≥ 0.5 to a shift direction.

Families and seeds are fixed here, before any result: the design seeds 0..5 of the null,
power and real families named in :data:`FAMILIES_RUN`.  Dense covariances: the families are
at most 1000 × 900.

Run:  python benchmarks/within_covariance.py [--trials 6]
Writes benchmarks/results/within_covariance.md and .json.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (  # noqa: E402
    RESULTS,
    SHARED_NOTE,
    dump,
    finish_info,
    git_commit,
    machine_info,
    machine_line,
)

import mspca_dask  # noqa: E402
from mspca_dask import rmt  # noqa: E402
from mspca_dask.testing import family  # noqa: E402

FAMILIES_RUN = (
    "N-iso",
    "N-skew",
    "P-paper-10",
    "P-unequal",
    "P-ten",
    "P-noisy15",
    "P-noisy2",
    "R-digits",
    "R-breast",
)
ESTIMATES = ("pooled", "scaled", "inliers")
TOP = 10
#: |cos| at which a spike counts as lying along a shift direction.
ALONG = 0.5

HOW_TO_READ = (
    "How to read: one row per family and estimate, over its trials (the same groups, from "
    "the library's fit, for the three estimates). *spikes*: median number of eigenvalues "
    "above the estimate's candidate line (of the top 10). *u₁*, *u₂*: mean |cos| of the "
    "population's first and second spike directions with the nearest spike (simulated "
    "families; 0 when there is no spike; at these strengths and c = 0.9 a sample "
    "eigenvector reaches about 0.7). *main PC₁*: mean |cos| of the first spike with the top "
    "eigenvector of the main class's own covariance (real families). *along a shift*: share "
    "of trials with a spike at |cos| ≥ 0.5 to a shift direction. *grouped*: share of trials "
    "in which the fit found displaced groups (otherwise the three estimates are the same)."
)


def _spikes(Xc: np.ndarray, margin: float) -> np.ndarray:
    """(d, s) unit eigenvectors of ``Xcᵀ Xc / rows`` above its candidate line (of the top 10)."""
    n, d = Xc.shape
    S = Xc.T @ Xc / n
    w, V = np.linalg.eigh(S)
    w, V = w[::-1][:TOP], V[:, ::-1][:, :TOP]
    s2 = rmt.estimate_noise_variance(float(np.trace(S)), w, n, d)
    line = rmt.mp_edges(d / n, s2)[1] + margin * rmt.tracy_widom_scale(n, d, s2)
    return V[:, w > line]


def _estimates(X: np.ndarray, groups: np.ndarray) -> dict[str, np.ndarray]:
    Xw = X.astype(float, copy=True)
    for g in np.unique(groups):
        Xw[groups == g] -= X[groups == g].mean(axis=0)
    inliers = Xw[groups == 0]
    v0 = float(np.mean(inliers**2))
    scaled = Xw.copy()
    for g in np.unique(groups):
        scaled[groups == g] /= np.sqrt(float(np.mean(Xw[groups == g] ** 2)) / v0)
    return {"pooled": Xw, "scaled": scaled, "inliers": inliers}


def measure(name: str, seed: int, margin: float) -> dict[str, Any]:
    draw = family(name).draw(seed)
    X, truth = draw.to_numpy(), draw.truth
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mspca_dask.fit(X)
    groups = np.zeros(len(X), dtype=int) if res.groups is None else np.asarray(res.groups)
    U, M = truth.covariance_directions, truth.shift_directions
    out: dict[str, Any] = {"family": name, "seed": seed, "grouped": bool(groups.max() > 0)}
    for est, Xc in _estimates(X, groups).items():
        V = _spikes(Xc, margin)
        out[est] = {
            "spikes": int(V.shape[1]),
            "u": [float(np.max(np.abs(V.T @ U[:, k]), initial=0.0)) for k in range(U.shape[1])],
            "main_pc1": float(abs(V[:, 0] @ truth.clean_top)) if V.shape[1] else 0.0,
            "along_shift": bool(M.shape[1] and V.shape[1] and np.any(np.abs(V.T @ M) >= ALONG)),
        }
    return out


def summarise(name: str, fits: list[dict[str, Any]]) -> dict[str, Any]:
    fam = family(name)
    rows: dict[str, Any] = {}
    for est in ESTIMATES:
        parts = [f[est] for f in fits]
        u = np.array([p["u"] for p in parts]) if parts and parts[0]["u"] else np.zeros((0, 0))
        rows[est] = {
            "spikes": float(np.median([p["spikes"] for p in parts])),
            "u": [float(v) for v in u.mean(axis=0)] if u.size else [],
            "main_pc1": float(np.mean([p["main_pc1"] for p in parts])),
            "along_shift": float(np.mean([p["along_shift"] for p in parts])),
        }
    return {
        "family": name,
        "kind": fam.kind,
        "description": fam.description,
        "trials": len(fits),
        "grouped": float(np.mean([f["grouped"] for f in fits])),
        "estimates": rows,
    }


def render(payload: dict[str, Any]) -> list[str]:
    meta = payload["meta"]
    md = [
        "# The covariance within the groups: pooled, scaled or the inliers'",
        "",
        f"Command: `{meta['command']}`",
        f"Commit: {meta['commit']}",
        f"Machine: {machine_line(meta)}",
        "",
        f"Seeds: design seeds 0..{meta['trials'] - 1} of each family; groups from "
        "`mspca_dask.fit(X)` with every default.",
        "",
        SHARED_NOTE,
        "",
        HOW_TO_READ,
        "",
        "| family | kind | grouped | estimate | spikes | u₁ | u₂ | main PC₁ | along a shift |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in payload["summary"]:
        for est in ESTIMATES:
            e = s["estimates"][est]
            u = [f"{v:.2f}" for v in e["u"][:2]] + ["—"] * (2 - len(e["u"][:2]))
            main = f"{e['main_pc1']:.2f}" if s["kind"] == "real" else "—"
            along = f"{100 * e['along_shift']:.0f} %" if s["kind"] != "null" else "—"
            md.append(
                f"| {s['family']} | {s['kind']} | {100 * s['grouped']:.0f} % | {est} | "
                f"{e['spikes']:.0f} | {u[0]} | {u[1]} | {main} | {along} |"
            )
    md += ["", "## Families", ""]
    md += [f"* **{s['family']}** ({s['kind']}): {s['description']}." for s in payload["summary"]]
    return md


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=6, help="design seeds 0..trials-1 (default 6)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    margin = float(mspca_dask.MeanShiftPCA().edge_margin)
    meta = machine_info()
    meta.update(
        command=f"python benchmarks/within_covariance.py --trials {args.trials}",
        commit=git_commit(short=False, paths=("mspca_dask",)) or "unknown",
        trials=args.trials,
        edge_margin=margin,
    )
    fits = []
    for name in FAMILIES_RUN:
        for seed in range(args.trials):
            fits.append(measure(name, seed, margin))
            f = fits[-1]
            print(name, seed, {e: f[e]["spikes"] for e in ESTIMATES}, flush=True)
    payload = {
        "meta": meta,
        "summary": [summarise(n, [f for f in fits if f["family"] == n]) for n in FAMILIES_RUN],
        "fits": fits,
    }
    finish_info(payload["meta"])
    dump("within_covariance", args.out, payload, render(payload))


if __name__ == "__main__":
    main()
