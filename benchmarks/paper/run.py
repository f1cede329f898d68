"""Reproduce the paper's experiments: MS-PCA against robust PCA and robust covariance baselines.

One command regenerates everything under ``benchmarks/paper/``::

    nice -n 10 python benchmarks/paper/run.py            # full run (results.json, RESULTS.md, PNGs)
    python benchmarks/paper/run.py --quick --out /tmp/q  # smoke test (CI): tiny sizes, 2 trials
    python benchmarks/paper/run.py --only exp4 exp5      # rerun some experiments, merge the rest
    python benchmarks/paper/run.py --report              # rewrite RESULTS.md and figures only

Experiments (paper: "Mean-Shift PCA by Knockoff Mean", Section 5 and Appendix):

1. ``exp1`` alignment table, d = 900, n = 1000, π₁ = 5–20 %, every method
   (appendix table "Comparison with robust estimators and preprocessing baselines");
2. ``exp2`` alignment vs dimension, c = d/n ∈ {0.1, 0.5, 1}, π₁ from 5 to 50 %, MS-PCA vs
   RPCA-AAP vs PCA, medians and IQR (main comparison figure) → ``alignment_vs_dimension.png``;
3. ``exp3`` mean-shift plus covariance-shift contamination, π₁ × ℓ₂ (appendix table);
4. ``exp4`` eigenvector residual order ``‖S ũ − λ̃ũ‖`` at d = n = 1000 and 10000 (appendix
   tables) → ``residual_order.png``;
5. ``exp5`` runtime of each method at d = 900, n = 1000, for 1 and 9 PCs.

Alignment is ``|⟨û, u⟩|`` with ``u`` the top eigenvector of the *clean* sample covariance
(contamination removed, uncentred), as in the paper and ``benchmarks/accuracy.py``.  A method
that returns no component (MS-PCA finding no stable spike) scores 0.  Baselines and why each
implementation was chosen: ``baselines.py``.  Trials run in ``--workers`` processes with one
BLAS thread each; every trial draws its data from its own seed, so results do not depend on
the number of workers.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
import tempfile
import time
import traceback
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import baselines as B  # noqa: E402

import mspca_dask  # noqa: E402
from mspca_dask.testing import alignment, make_spiked_mixture, paper_setting  # noqa: E402

EXPERIMENTS = ("exp1", "exp2", "exp3", "exp4", "exp5")

# --------------------------------------------------------------------------- configurations
FULL: dict[str, Any] = {
    "exp1": {
        "n": 1000,
        "d": 900,
        "pis": [0.05, 0.10, 0.15, 0.20],
        # trials per method; methods not listed get "default"
        "trials": {
            "default": 200,
            "RPCA-AAP": 100,
            "Huber": 100,
            "l1-PCA": 100,
            "RPCA-AAP (paper protocol)": 100,
            "Tyler": 15,
            "Tyler (pyRiemann defaults)": 100,
            "Huber (pyRiemann defaults)": 10,
        },
    },
    "exp2": {
        "cs": [0.1, 0.5, 1.0],
        "pis": [0.05, 0.10, 0.25, 0.50],
        "ds": [100, 200, 400, 800],
        "trials": 15,
    },
    "exp3": {
        "n": 1000,
        "d": 900,
        "pis": [0.05, 0.10, 0.15, 0.20],
        "l2s": [2.0, 4.0, 8.0, 16.0],
        "trials": {"default": 20},
    },
    "exp4": {
        "ds": [1000, 10000],
        "pis": [0.001, 0.01, 0.10, 0.30, 0.50, 1.00],
        "trials": {1000: 20, 10000: 2},
        "n_components": 4,
    },
    "exp5": {"n": 1000, "d": 900, "pi": 0.10, "repeats": 5, "slow_repeats": 1},
}

QUICK: dict[str, Any] = {
    "exp1": {
        "n": 120,
        "d": 60,
        "pis": [0.05, 0.20],
        "trials": {"default": 2, "Tyler (pyRiemann defaults)": 1, "Huber (pyRiemann defaults)": 1},
    },
    "exp2": {"cs": [0.5, 1.0], "pis": [0.10, 0.50], "ds": [40, 80], "trials": 2},
    "exp3": {"n": 120, "d": 60, "pis": [0.10], "l2s": [4.0], "trials": {"default": 2}},
    "exp4": {"ds": [100, 200], "pis": [0.10, 1.00], "trials": {100: 2, 200: 1}, "n_components": 4},
    "exp5": {"n": 120, "d": 60, "pi": 0.10, "repeats": 2, "slow_repeats": 1},
}

EXP1_METHODS = [
    "MS-PCA",
    "RPCA-AAP",
    "Tyler",
    "Huber",
    "l1-PCA",
    "winsorized-PCA",
    "centred-PCA",
    "vanilla-PCA",
    "paper-rule",
    "RPCA-AAP (paper protocol)",
    "Tyler (pyRiemann defaults)",
    "Huber (pyRiemann defaults)",
]
EXP2_METHODS = ["MS-PCA", "MS-PCA (location=None)", "paper-rule", "RPCA-AAP", "vanilla-PCA"]
EXP3_METHODS = [
    "MS-PCA",
    "MS-PCA (any stable)",
    "RPCA-AAP",
    "Huber",
    "l1-PCA",
    "winsorized-PCA",
    "centred-PCA",
    "vanilla-PCA",
    "paper-rule",
]
PYRIEMANN_METHODS = {"Tyler", "Tyler (pyRiemann defaults)", "Huber (pyRiemann defaults)"}

# --------------------------------------------------------------------------- the paper's numbers
PAPER_EXP1 = {  # Table "Comparison with robust estimators", mean ± std over 200 trials, %
    0.05: {
        "MS-PCA": (95.85, 12.53),
        "RPCA-AAP": (8.40, 6.87),
        "Tyler": (9.33, 7.46),
        "Huber": (9.72, 7.84),
        "l1-PCA": (14.01, 10.73),
        "winsorized-PCA": (9.26, 7.42),
        "centred-PCA": (9.27, 7.37),
    },
    0.10: {
        "MS-PCA": (97.16, 6.96),
        "RPCA-AAP": (8.75, 6.71),
        "Tyler": (10.67, 8.00),
        "Huber": (10.95, 8.11),
        "l1-PCA": (14.25, 10.46),
        "winsorized-PCA": (10.63, 8.01),
        "centred-PCA": (10.64, 8.10),
    },
    0.15: {
        "MS-PCA": (97.39, 7.03),
        "RPCA-AAP": (7.47, 6.13),
        "Tyler": (10.24, 8.12),
        "Huber": (10.51, 8.22),
        "l1-PCA": (12.06, 9.33),
        "winsorized-PCA": (10.22, 8.09),
        "centred-PCA": (10.36, 8.07),
    },
    0.20: {
        "MS-PCA": (96.17, 11.82),
        "RPCA-AAP": (7.74, 5.67),
        "Tyler": (11.46, 8.63),
        "Huber": (11.53, 8.72),
        "l1-PCA": (11.85, 8.81),
        "winsorized-PCA": (11.47, 8.63),
        "centred-PCA": (11.70, 8.70),
    },
}
_P3 = """\
0.05 2 97.01 8.01 7.69 6.42 8.67 7.26 9.14 7.49 13.13 10.61 8.59 7.20 8.64 7.32
0.05 4 97.52 1.76 9.09 7.90 9.82 8.20 9.83 8.37 15.17 11.83 9.85 8.19 9.83 8.14
0.05 8 97.15 8.37 7.84 5.91 8.58 6.64 9.06 6.70 13.46 10.19 8.50 6.68 8.54 6.72
0.05 16 96.54 8.67 9.74 10.52 10.88 11.64 11.35 11.92 16.01 14.33 10.79 11.56 10.71 11.35
0.10 2 97.52 1.45 8.61 6.21 10.29 7.37 10.38 7.53 13.32 10.05 10.26 7.36 10.26 7.36
0.10 4 97.80 1.40 7.42 6.46 8.81 7.45 9.16 7.54 11.60 9.61 8.74 7.45 8.78 7.56
0.10 8 97.64 1.60 8.66 6.04 10.09 7.56 10.13 7.75 13.55 10.04 10.08 7.54 10.04 7.45
0.10 16 97.75 1.27 8.06 5.77 9.87 6.82 10.02 6.97 13.10 9.07 9.83 6.82 9.93 6.73
0.15 2 96.63 9.72 8.33 6.15 10.74 7.71 10.97 7.75 12.20 9.01 10.70 7.71 10.79 7.62
0.15 4 97.65 1.48 7.90 6.09 9.95 7.56 9.98 7.60 11.79 8.60 9.95 7.58 10.01 7.49
0.15 8 97.45 1.29 8.57 6.22 10.81 7.77 10.83 8.06 12.51 9.10 10.81 7.74 10.98 7.77
0.15 16 95.68 13.68 8.97 6.83 11.82 8.95 11.93 8.98 13.45 10.63 11.79 8.95 11.71 9.10
0.20 2 97.91 1.11 7.63 6.01 11.18 8.22 11.51 7.93 11.17 8.49 11.13 8.29 11.21 8.16
0.20 4 95.02 16.58 8.64 6.41 12.84 9.51 12.74 10.07 13.35 9.90 12.89 9.40 13.02 9.28
0.20 8 96.76 9.82 7.93 6.04 11.33 9.16 11.81 9.34 11.63 9.30 11.27 9.15 11.41 9.22
0.20 16 96.68 9.74 7.84 5.91 11.23 8.57 11.24 8.60 11.50 8.63 11.24 8.58 11.09 8.37"""
_P3_COLS = ["MS-PCA", "RPCA-AAP", "Tyler", "Huber", "l1-PCA", "winsorized-PCA", "centred-PCA"]
PAPER_EXP3 = {}
for _line in _P3.splitlines():
    _v = [float(x) for x in _line.split()]
    PAPER_EXP3[(_v[0], _v[1])] = {m: (_v[2 + 2 * i], _v[3 + 2 * i]) for i, m in enumerate(_P3_COLS)}
PAPER_EXP4_MAX = {  # max ‖X Xᵀ ũ/n − λ̃ ũ‖ over stable ũ (clean X), d = n
    0.001: {1000: 1.50e-1, 10000: 5.20e-2},
    0.01: {1000: 1.49e-1, 10000: 5.48e-2},
    0.10: {1000: 1.50e-1, 10000: 4.84e-2},
    0.30: {1000: 1.57e-1, 10000: 4.88e-2},
    0.50: {1000: 1.60e-1, 10000: 5.30e-2},
    1.00: {1000: 1.32e-1, 10000: 5.26e-2},
}
PAPER_EXP4_CLEAN = {  # mean, std of ‖X̃ X̃ᵀ u/n − λ u‖ for clean eigenvectors u
    0.001: {1000: (1.3e-1, 0.9e-1), 10000: (3.4e-2, 2.3e-2)},
    0.01: {1000: (1.4e-1, 1.0e-1), 10000: (4.0e-2, 2.8e-2)},
    0.10: {1000: (1.4e-1, 0.9e-1), 10000: (4.0e-2, 2.8e-2)},
    0.30: {1000: (1.3e-1, 0.9e-1), 10000: (4.0e-2, 2.9e-2)},
    0.50: {1000: (1.2e-1, 0.9e-1), 10000: (4.0e-2, 2.8e-2)},
    1.00: {1000: (1.2e-1, 0.9e-1), 10000: (4.0e-2, 2.8e-2)},
}
PAPER_EXP5 = {  # ms, mean ± std (%timeit), AMD EPYC 9755, 256 cores
    "1 PC": {
        "MS-PCA": (14.2, 0.0137),
        "RPCA-AAP": (79.0, 0.176),
        "Tyler": (172, 0.159),
        "Huber": (3860, 4.37),
        "l1-PCA": (8230, 294),
    },
    "9 PCs": {
        "MS-PCA": (19.2, 0.131),
        "RPCA-AAP": (99.6, 0.210),
        "Tyler": (174, 0.351),
        "Huber": (3860, 8.5),
    },
}
# The paper's Tyler and Huber timings were of pyRiemann's defaults: show them beside both rows.
for _case in PAPER_EXP5.values():
    _case["Tyler (pyRiemann defaults)"] = _case["Tyler"]
    _case["Huber (pyRiemann defaults)"] = _case["Huber"]


# --------------------------------------------------------------------------- small helpers
def _seed(*parts: int) -> int:
    """A trial's seed from its coordinates (experiment, setting, trial)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0] % (2**31))


def _init_worker() -> None:
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)
    warnings.simplefilter("ignore")


def _map(fn, tasks: list[Any], workers: int) -> list[Any]:
    if workers <= 1 or len(tasks) <= 1:
        _init_worker_soft()
        return [fn(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker) as pool:
        return list(pool.map(fn, tasks, chunksize=1))


def _init_worker_soft() -> None:
    warnings.simplefilter("ignore")


def top_clean(Y: np.ndarray) -> tuple[float, np.ndarray]:
    """Top eigenpair of the clean, uncentred sample covariance ``YᵀY/n`` (the yardstick)."""
    n, d = Y.shape
    if d <= n:
        w, V = B.top_eigvecs(Y.T @ Y / n, 1)
        return float(w[0]), V[0]
    w, V = B.top_eigvecs(Y @ Y.T / n, 1)  # dual: top left singular vector → map back
    v = Y.T @ V[0]
    return float(w[0]), v / np.linalg.norm(v)


def _score(W: np.ndarray, truth: np.ndarray) -> float:
    return alignment(W[0], truth) if len(W) else 0.0


def run_method(name: str, X: np.ndarray, seed: int, k: int = 1) -> np.ndarray:
    """Estimate of the top-k PCs by method ``name`` (rows)."""
    if name == "MS-PCA":
        return B.ms_pca(X, k, seed=seed)
    if name == "MS-PCA (location=None)":  # the paper's setting: the inliers are centred already
        return B.ms_pca(X, k, seed=seed, location=None)
    if name == "paper-rule":
        return B.paper_rule(X, k, seed=seed)
    if name == "RPCA-AAP (paper protocol)":
        return B.paper_rpca_aap(X, k)
    if name == "Tyler (pyRiemann defaults)":
        return B.paper_mest_pca(X, k, "tyl")
    if name == "Huber (pyRiemann defaults)":
        return B.paper_mest_pca(X, k, "hub")
    return B.METHODS[name](X, k)


def _trials_for(spec: dict[str, int], method: str) -> int:
    return int(spec.get(method, spec["default"]))


def _summ(values: list[float]) -> dict[str, Any]:
    a = 100 * np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    if a.size == 0:
        return {"trials": 0}
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {
        "trials": int(a.size),
        "mean": float(a.mean()),
        "std": float(a.std()),
        "median": float(med),
        "q1": float(q1),
        "q3": float(q3),
        "below_50": int(np.sum(a < 50)),
    }


# --------------------------------------------------------------------------- experiment 1
def _exp1_trial(task: tuple[int, int, float, int, list[str]]) -> dict[str, Any]:
    n, d, pi, t, methods = task
    seed = _seed(1, int(round(pi * 1000)), t)
    model = paper_setting(pi, n, d, random_state=seed)
    X = model.to_numpy()
    _, truth = top_clean(model.clean_rows(0, n))
    out: dict[str, Any] = {"pi": pi, "trial": t, "align": {}, "seconds": {}, "errors": {}}
    for name in methods:
        t0 = time.perf_counter()
        try:
            out["align"][name] = _score(run_method(name, X, seed), truth)
        except Exception as exc:  # a baseline that fails is recorded, not fatal
            out["align"][name] = float("nan")
            out["errors"][name] = f"{type(exc).__name__}: {exc}"
        out["seconds"][name] = time.perf_counter() - t0
    return out


def exp1(
    cfg: dict[str, Any], workers: int, log, previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The alignment table; with ``previous`` (``--resume``) only the missing
    (π₁, trial, method) fits run and are merged with the stored ones (same seeds, same data)."""
    methods = [m for m in EXP1_METHODS if B.HAVE_PYRIEMANN or m not in PYRIEMANN_METHODS]
    done = {(r["pi"], r["trial"]): r for r in (previous or {}).get("raw", [])}
    n_max = max(_trials_for(cfg["trials"], m) for m in methods)
    tasks = []
    for t in range(n_max):
        for pi in cfg["pis"]:
            have = done.get((pi, t), {}).get("align", {})
            ms = [m for m in methods if t < _trials_for(cfg["trials"], m) and m not in have]
            if ms:
                tasks.append((cfg["n"], cfg["d"], pi, t, ms))
    # Longest first (the trials that include the M-estimators), so that workers finish together.
    tasks.sort(key=lambda task: -len(task[4]))
    log(f"exp1: {len(tasks)} trials to run ({len(done)} stored)")
    for row in _map(_exp1_trial, tasks, workers):
        key = (row["pi"], row["trial"])
        if key in done:
            for field in ("align", "seconds", "errors"):
                done[key].setdefault(field, {}).update(row[field])
        else:
            done[key] = row
    rows = sorted(done.values(), key=lambda r: (r["pi"], r["trial"]))
    old_table = (previous or {}).get("table", {})
    table = {}
    for pi in cfg["pis"]:
        sel = [r for r in rows if r["pi"] == pi]
        table[str(pi)] = {}
        for m in methods:
            s = _summ([r["align"][m] for r in sel if m in r["align"]])
            secs = [r["seconds"][m] for r in sel if m in r.get("seconds", {})]
            old = old_table.get(str(pi), {}).get(m, {})
            s["seconds_mean"] = float(np.mean(secs)) if secs else old.get("seconds_mean")
            s["failures"] = sorted({r["errors"][m] for r in sel if m in r.get("errors", {})})
            table[str(pi)][m] = s
        log(
            f"exp1 π₁={pi:.2f}: "
            + ", ".join(f"{m} {table[str(pi)][m].get('mean', float('nan')):.1f}" for m in methods)
        )
    skipped = sorted(set(EXP1_METHODS) - set(methods))
    keep = ("pi", "trial", "align", "seconds", "errors")
    return {
        "config": cfg,
        "methods": methods,
        "skipped": skipped,
        "table": table,
        "raw": [{k: r[k] for k in keep if k in r} for r in rows],
    }


# --------------------------------------------------------------------------- experiment 2
def _exp2_trial(task: tuple[float, float, int, int]) -> dict[str, Any]:
    c, pi, d, t = task
    n = int(round(d / c))
    seed = _seed(2, int(round(c * 100)), int(round(pi * 1000)), d, t)
    model = paper_setting(pi, n, d, random_state=seed)
    X = model.to_numpy()
    _, truth = top_clean(model.clean_rows(0, n))
    out = {"c": c, "pi": pi, "d": d, "trial": t, "align": {}}
    for name in EXP2_METHODS:
        try:
            out["align"][name] = _score(run_method(name, X, seed), truth)
        except Exception:
            out["align"][name] = float("nan")
    return out


def exp2(cfg: dict[str, Any], workers: int, log) -> dict[str, Any]:
    tasks = [
        (c, pi, d, t)
        for c in cfg["cs"]
        for pi in cfg["pis"]
        for d in cfg["ds"]
        for t in range(cfg["trials"])
    ]
    tasks.sort(key=lambda task: -(task[2] ** 2 / task[0]))  # biggest first
    rows = _map(_exp2_trial, tasks, workers)
    cells = []
    for c in cfg["cs"]:
        for pi in cfg["pis"]:
            for d in cfg["ds"]:
                sel = [r for r in rows if (r["c"], r["pi"], r["d"]) == (c, pi, d)]
                cells.append(
                    {
                        "c": c,
                        "pi": pi,
                        "d": d,
                        "n": int(round(d / c)),
                        "methods": {m: _summ([r["align"][m] for r in sel]) for m in EXP2_METHODS},
                    }
                )
            log(
                f"exp2 c={c} π₁={pi}: "
                + "; ".join(
                    f"d={cell['d']}: "
                    + " ".join(f"{m} {cell['methods'][m]['median']:.0f}" for m in EXP2_METHODS)
                    for cell in cells
                    if (cell["c"], cell["pi"]) == (c, pi)
                )
            )
    return {"config": cfg, "methods": EXP2_METHODS, "cells": cells}


# --------------------------------------------------------------------------- experiment 3
def mean_cov_shift_data(
    n: int, d: int, pi: float, l2: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Data of the mean-plus-covariance-shift table, and the clean rows.

    Inliers ``N(0, I + P₁)``; contaminated rows ``m₁ + (I + P₂)^{1/2}(I + P₁)^{1/2} z`` —
    covariance ``(I+P₂)^{1/2}(I+P₁)(I+P₂)^{1/2}``, similar to the paper's ``(I+P₁)(I+P₂)`` —
    with ``P₂ = ℓ₂ v vᵀ``, ``v`` uniform on the sphere independently of ``u₁`` and ``m₁``.
    *Every* member of the cluster gets the covariance shift (the paper's code shifted two).
    ``ℓ₁ = 2√c``, ``θ₁² = 4√c`` as in the paper setting.
    """
    model = paper_setting(pi, n, d, random_state=seed)
    Y = model.clean_rows(0, n)
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(6)[5])
    v = rng.standard_normal(d)
    v /= np.linalg.norm(v)
    members = model.membership == 1
    X = Y.copy()
    Z = X[members]
    Z += (np.sqrt(1.0 + l2) - 1.0) * np.outer(Z @ v, v)
    X[members] = Z + model.mean_shift_vectors[:, 0]
    return X, Y


def _exp3_trial(task: tuple[int, int, float, float, int, list[str]]) -> dict[str, Any]:
    n, d, pi, l2, t, methods = task
    seed = _seed(3, int(round(pi * 1000)), int(l2), t)
    X, Y = mean_cov_shift_data(n, d, pi, l2, seed)
    _, truth = top_clean(Y)
    out: dict[str, Any] = {"pi": pi, "l2": l2, "trial": t, "align": {}}
    for name in methods:
        try:
            if name == "MS-PCA (any stable)":
                W = B.ms_pca(X, 10, seed=seed)
                out["align"][name] = max((alignment(w, truth) for w in W), default=0.0)
            else:
                out["align"][name] = _score(run_method(name, X, seed), truth)
        except Exception:
            out["align"][name] = float("nan")
    return out


def exp3(cfg: dict[str, Any], workers: int, log) -> dict[str, Any]:
    methods = EXP3_METHODS
    n_max = max(_trials_for(cfg["trials"], m) for m in methods)
    tasks = [
        (cfg["n"], cfg["d"], pi, l2, t, [m for m in methods if t < _trials_for(cfg["trials"], m)])
        for t in range(n_max)
        for pi in cfg["pis"]
        for l2 in cfg["l2s"]
    ]
    rows = _map(_exp3_trial, tasks, workers)
    table = {}
    for pi in cfg["pis"]:
        for l2 in cfg["l2s"]:
            sel = [r for r in rows if (r["pi"], r["l2"]) == (pi, l2)]
            key = f"{pi}|{l2}"
            table[key] = {
                m: _summ([r["align"][m] for r in sel if m in r["align"]]) for m in methods
            }
            log(
                f"exp3 π₁={pi} ℓ₂={l2}: "
                + ", ".join(f"{m} {table[key][m]['mean']:.1f}" for m in methods)
            )
    return {"config": cfg, "methods": methods, "table": table}


# --------------------------------------------------------------------------- experiment 4
def _exp4_trial(task: tuple[int, float, int, int]) -> dict[str, Any]:
    d, pi, t, K = task
    n = d
    seed = _seed(4, d, int(round(pi * 10000)), t)
    if pi >= 1.0:
        # Every sample shifted: θ² = π‖m‖² = 4√c with π = 1 (‖m‖² = 4); the simulator needs
        # π < 1, so draw a model with π = 0.5 and θ² = 2 (same ‖m‖) and shift all rows.
        model = make_spiked_mixture(
            n, d, mean_shift_weights=(0.5,), mean_shift_strengths=(2.0,), random_state=seed
        )
        gamma = np.ones(n)
    else:
        model = paper_setting(pi, n, d, random_state=seed)
        gamma = (model.membership == 1).astype(float)
    m = model.mean_shift_vectors[:, 0].copy()
    X = model.clean_rows(0, n)
    a = X.T @ gamma / n  # Yᵀγ/n, so that S_clean = S̃ − Δ with Δ = a mᵀ + m aᵀ + (|γ|/n) m mᵀ
    X += np.outer(gamma, m)
    g = gamma.sum() / n

    def delta(u: np.ndarray) -> np.ndarray:
        return a * (m @ u) + m * (a @ u) + g * m * (m @ u)

    def s_tilde(u: np.ndarray) -> np.ndarray:
        return X.T @ (X @ u) / n

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        res = mspca_dask.fit(X, n_components=K, location=None, random_state=seed, scheduler="sync")
        fit_s = time.perf_counter() - t0
    # Clean top eigenpair (u, λ) of S_clean = S̃ − Δ; then ‖S̃u − λu‖ = ‖Δu‖ (the paper's
    # other residual table).
    from scipy.sparse.linalg import LinearOperator, eigsh

    op = LinearOperator(
        (d, d), matvec=lambda u: s_tilde(np.ravel(u)) - delta(np.ravel(u)), dtype=float
    )
    lam_c, u_c = eigsh(op, k=1, which="LA", v0=np.ones(d), tol=1e-10)
    u_c = u_c[:, 0]
    clean_resid = float(np.linalg.norm(s_tilde(u_c) - lam_c[0] * u_c))

    def residuals(i: int) -> tuple[float, float]:
        """(‖S_clean ũ − λ̃ũ‖, ‖S̃ũ − λ̃ũ‖) for eigenpair i of the fit."""
        u = U[i] / np.linalg.norm(U[i])
        su = s_tilde(u)
        lam = float(u @ su)  # λ̃: the Rayleigh quotient (= the eigenvalue of S̃)
        return float(np.linalg.norm(su - delta(u) - lam * u)), float(np.linalg.norm(su - lam * u))

    U = np.asarray(res.eigenvectors)
    stable = np.flatnonzero(np.asarray(res.stable))
    resid_clean = [residuals(i)[0] for i in stable]
    resid_own = [residuals(i)[1] for i in stable]
    # The paper's table is over the eigenpairs "not in the neighbourhood of Λ_A", which it knew
    # by construction: the oracle covariance pair is the one closest to the clean eigenvector.
    oracle = int(np.argmax(np.abs(U @ u_c)))
    return {
        "d": d,
        "pi": pi,
        "trial": t,
        "n_stable": int(stable.size),
        "stable_residuals": resid_clean,
        "solver_residuals": resid_own,
        "oracle_residual": residuals(oracle)[0],
        "oracle_overlap": float(abs(U[oracle] @ u_c) / np.linalg.norm(U[oracle])),
        "oracle_is_stable": bool(np.asarray(res.stable)[oracle]),
        "clean_vector_residual": clean_resid,
        "fit_seconds": fit_s,
        "solver": str(res.solver),
        "n_passes": int(res.n_passes),
    }


def exp4(cfg: dict[str, Any], workers: int, log) -> dict[str, Any]:
    tasks = [
        (d, pi, t, cfg["n_components"])
        for d in cfg["ds"]
        for pi in cfg["pis"]
        for t in range(int(cfg["trials"][d]))
    ]
    small = [t for t in tasks if t[0] <= 2000]
    big = [t for t in tasks if t[0] > 2000]
    # The big ones hold ~1 GB each: run them one at a time in this process.
    rows = _map(_exp4_trial, small, workers) + _map(_exp4_trial, big, 1)
    table = []
    for d in cfg["ds"]:
        for pi in cfg["pis"]:
            sel = [r for r in rows if (r["d"], r["pi"]) == (d, pi)]
            per_trial_max = [max(r["stable_residuals"]) for r in sel if r["stable_residuals"]]
            clean = [r["clean_vector_residual"] for r in sel]
            oracle = [r["oracle_residual"] for r in sel]
            table.append(
                {
                    "d": d,
                    "pi": pi,
                    "trials": len(sel),
                    "trials_with_stable": len(per_trial_max),
                    "max_stable_residual": float(max(per_trial_max)) if per_trial_max else None,
                    "mean_stable_residual": float(np.mean(per_trial_max))
                    if per_trial_max
                    else None,
                    "max_solver_residual": float(
                        max(
                            (max(r["solver_residuals"]) for r in sel if r["solver_residuals"]),
                            default=0.0,
                        )
                    ),
                    "oracle_residual_max": float(np.max(oracle)),
                    "oracle_residual_mean": float(np.mean(oracle)),
                    "oracle_residual_std": float(np.std(oracle)),
                    "oracle_judged_stable": int(sum(r["oracle_is_stable"] for r in sel)),
                    "oracle_overlap_min": float(min(r["oracle_overlap"] for r in sel)),
                    "clean_residual_mean": float(np.mean(clean)),
                    "clean_residual_std": float(np.std(clean)),
                    "fit_seconds_mean": float(np.mean([r["fit_seconds"] for r in sel])),
                }
            )
            row = table[-1]
            log(
                f"exp4 d={d} π₁={pi}: max {row['max_stable_residual']}, "
                f"clean {row['clean_residual_mean']:.3g}, "
                f"{row['trials_with_stable']}/{row['trials']} with a stable pair"
            )
    return {
        "config": {**cfg, "trials": {str(k): v for k, v in cfg["trials"].items()}},
        "table": table,
    }


# --------------------------------------------------------------------------- experiment 5
def _time(fn, repeats: int) -> dict[str, float]:
    fn()  # warm-up (imports, first-call caches); not timed
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(1000 * (time.perf_counter() - t0))
    return {"mean_ms": float(np.mean(ts)), "std_ms": float(np.std(ts)), "repeats": repeats}


def exp5(cfg: dict[str, Any], workers: int, log) -> dict[str, Any]:
    n, d = cfg["n"], cfg["d"]
    X = paper_setting(cfg["pi"], n, d, random_state=5).to_numpy()
    r, rs = cfg["repeats"], cfg["slow_repeats"]
    plan: dict[str, dict[str, Any]] = {
        # For q PCs MS-PCA examines q + 1 eigenpairs (one mean-shift spike in these data).
        "MS-PCA": {
            "1 PC": (lambda: B.ms_pca(X, 1, n_components=2, solver="auto"), r),
            "9 PCs": (lambda: B.ms_pca(X, 9, n_components=10, solver="auto"), r),
        },
        "paper-rule": {
            "1 PC": (lambda: B.paper_rule(X, 1, n_components=2), r),
            "9 PCs": (lambda: B.paper_rule(X, 9, n_components=10), r),
        },
        "RPCA-AAP": {"1 PC": (lambda: B.rpca_aap(X, 1), r), "9 PCs": (lambda: B.rpca_aap(X, 9), r)},
        "Huber": {"1 PC": (lambda: B.huber_pca(X, 1), r), "9 PCs": (lambda: B.huber_pca(X, 9), r)},
        "l1-PCA": {"1 PC": (lambda: B.l1_pca(X, 1), r), "9 PCs": (lambda: B.l1_pca(X, 9), r)},
        "winsorized-PCA": {
            "1 PC": (lambda: B.winsorized_pca(X, 1), r),
            "9 PCs": (lambda: B.winsorized_pca(X, 9), r),
        },
        "centred-PCA": {
            "1 PC": (lambda: B.centred_pca(X, 1), r),
            "9 PCs": (lambda: B.centred_pca(X, 9), r),
        },
        "vanilla-PCA": {
            "1 PC": (lambda: B.vanilla_pca(X, 1), r),
            "9 PCs": (lambda: B.vanilla_pca(X, 9), r),
        },
    }
    if B.HAVE_PYRIEMANN:
        plan["Tyler"] = {
            "1 PC": (lambda: B.tyler_pca(X, 1), rs),
            "9 PCs": (lambda: B.tyler_pca(X, 9), rs),
        }
        plan["Tyler (pyRiemann defaults)"] = {"1 PC": (lambda: B.paper_mest_pca(X, 1, "tyl"), rs)}
        plan["Huber (pyRiemann defaults)"] = {"1 PC": (lambda: B.paper_mest_pca(X, 1, "hub"), rs)}
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, cases in plan.items():
            out[name] = {}
            for case, (fn, reps) in cases.items():
                out[name][case] = _time(fn, reps)
                log(
                    f"exp5 {name} {case}: {out[name][case]['mean_ms']:.1f} "
                    f"± {out[name][case]['std_ms']:.1f} ms"
                )
    return {"config": cfg, "table": out, "load_average": list(os.getloadavg())}


# --------------------------------------------------------------------------- reporting
def machine() -> dict[str, Any]:
    import scipy

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "mspca_dask": mspca_dask.__version__,
        "pyriemann": _pyriemann_version(),
        "date": datetime.date.today().isoformat(),
        "load_average_at_start": list(os.getloadavg()),
    }


def _pyriemann_version() -> str | None:
    try:
        import pyriemann

        return str(pyriemann.__version__)
    except ImportError:
        return None


def plot_exp2(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = res["config"]
    cs, pis = cfg["cs"], cfg["pis"]
    colours = {
        "MS-PCA": "tab:blue",
        "MS-PCA (location=None)": "tab:green",
        "paper-rule": "tab:cyan",
        "RPCA-AAP": "tab:red",
        "vanilla-PCA": "tab:gray",
    }
    labels = {
        "MS-PCA": "MS-PCA (mspca_dask defaults)",
        "MS-PCA (location=None)": "MS-PCA (mspca_dask, location=None)",
        "paper-rule": "MS-PCA (paper's Algorithm 1 as written)",
        "RPCA-AAP": "RPCA-AAP (r = 1)",
        "vanilla-PCA": "PCA",
    }
    fig, axes = plt.subplots(
        len(cs),
        len(pis),
        figsize=(3.2 * len(pis), 2.6 * len(cs)),
        sharex=True,
        sharey=True,
        squeeze=False,
    )
    for i, c in enumerate(cs):
        for j, pi in enumerate(pis):
            ax = axes[i][j]
            cells = sorted(
                (cell for cell in res["cells"] if (cell["c"], cell["pi"]) == (c, pi)),
                key=lambda x: x["d"],
            )
            ds = [cell["d"] for cell in cells]
            for m in res["methods"]:
                med = [cell["methods"][m]["median"] / 100 for cell in cells]
                lo = [cell["methods"][m]["q1"] / 100 for cell in cells]
                hi = [cell["methods"][m]["q3"] / 100 for cell in cells]
                style = "--" if m in ("paper-rule", "MS-PCA (location=None)") else "-"
                ax.plot(ds, med, style, marker="o", ms=3, color=colours[m], label=labels[m])
                ax.fill_between(ds, lo, hi, color=colours[m], alpha=0.2, linewidth=0)
            ax.set_xscale("log")
            ax.set_xticks(ds, [str(d) for d in ds])
            ax.minorticks_off()
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            if i == 0:
                ax.set_title(f"π₁ = {pi:.0%}")
            if j == 0:
                ax.set_ylabel(f"c = {c:g}\n|⟨u₁, û₁⟩|")
            if i == len(cs) - 1:
                ax.set_xlabel("dimension d")
    handles, lab = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, lab, loc="lower center", ncol=3, frameon=False)
    fig.suptitle(
        f"Alignment of the largest PC vs dimension: median and IQR over {cfg['trials']} trials"
    )
    fig.tight_layout(rect=(0, 0.07, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_exp4(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    table = [row for row in res["table"] if "oracle_residual_mean" in row]
    ds = sorted({row["d"] for row in table})
    for k, pi in enumerate(sorted({row["pi"] for row in table})):
        rows = sorted((row for row in table if row["pi"] == pi), key=lambda r: r["d"])
        x = np.array([r["d"] for r in rows], dtype=float) * (1 + 0.03 * (k - 2.5))
        ax.errorbar(
            x,
            [r["oracle_residual_mean"] for r in rows],
            yerr=[r["oracle_residual_std"] for r in rows],
            marker="o",
            capsize=2,
            label=f"π₁ = {pi:.1%}",
        )
    ref = np.array(ds, dtype=float)
    top = float(np.mean([r["oracle_residual_mean"] for r in table if r["d"] == ds[0]]))
    ax.plot(ref, top * np.sqrt(ref[0] / ref), "k:", label="∝ $n^{-1/2}$")
    for d in ds:
        p = [PAPER_EXP4_MAX[pi][d] for pi in PAPER_EXP4_MAX if d in PAPER_EXP4_MAX[pi]]
        ax.scatter(
            [d] * len(p), p, marker="x", color="k", label="paper (max)" if d == ds[0] else None
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("d = n")
    ax.set_ylabel("‖S ũ − λ̃ ũ‖, covariance eigenpair")
    ax.set_title("Eigenvector residual order (c = 1): mean ± std over trials")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _ms(v: dict[str, Any] | None) -> str:
    if not v or not v.get("trials"):
        return "—"
    return f"{v['mean']:.2f} ± {v['std']:.2f}"


def _pm(p: tuple[float, float] | None) -> str:
    return "—" if p is None else f"{p[0]:.2f} ± {p[1]:.2f}"


def _sci(x: float | None) -> str:
    if x is None:
        return "—"
    e = int(math.floor(math.log10(abs(x)))) if x else 0
    return f"{x / 10**e:.2f}e{e}"


def write_report(results: dict[str, Any], out: Path) -> None:
    """RESULTS.md (our numbers beside the paper's) and the figures, from the stored results."""
    from report_text import INTRO, NOTES  # the hand-written parts, kept out of the numbers' code

    meta = results.get("meta", {})
    L = ["# Reproducing the paper's experiments: MS-PCA vs robust PCA and robust covariance", ""]
    L += [INTRO.strip(), ""]
    L += ["## Machine", ""]
    L += [
        f"- generated {meta.get('date', '?')} by `python benchmarks/paper/run.py`"
        + (" **(--quick smoke run: not results)**" if meta.get("quick") else "")
    ]
    L += [
        f"- {meta.get('cpu', '?')}, {meta.get('cpu_count', '?')} logical CPUs, "
        f"{meta.get('platform', '?')}",
        f"- Python {meta.get('python')}, NumPy {meta.get('numpy')}, SciPy {meta.get('scipy')}, "
        f"mspca_dask {meta.get('mspca_dask')}, pyRiemann {meta.get('pyriemann')}",
        f"- {meta.get('workers', '?')} worker processes × 1 BLAS thread, `nice -n 10`; "
        "load average at start "
        f"{', '.join(f'{x:.1f}' for x in meta.get('load_average_at_start', []))} "
        "(the machine was shared with other work during the run)",
        "- wall time per experiment (s): "
        + ", ".join(f"{k} {v:.0f}" for k, v in meta.get("seconds", {}).items()),
        *([f"- {meta['run_note']}"] if meta.get("run_note") else []),
        "",
        "The paper's machine: AMD EPYC 9755, 256 cores, no GPU.",
        "",
    ]

    if "exp1" in results:
        r = results["exp1"]
        cfg = r["config"]
        L += [
            f"## 1. Alignment table, d = {cfg['d']}, n = {cfg['n']} "
            "(paper: appendix table 'Comparison with robust estimators')",
            "",
        ]
        L += [
            "Alignment |⟨û₁, u₁⟩| in %, mean ± std over trials "
            "(ours: trials per method below; paper: 200). "
            "`<50` = trials below 50 %.",
            "",
        ]
        cols = r["methods"]
        L += [
            "| π₁ | method | ours | trials | median | <50 | paper |",
            "|---|---|---|---|---|---|---|",
        ]
        for pi in cfg["pis"]:
            for m in cols:
                s = r["table"][str(pi)][m]
                paper = PAPER_EXP1.get(pi, {}).get(m)
                L.append(
                    f"| {pi:.0%} | {m} | {_ms(s)} | {s.get('trials', 0)} | "
                    f"{s.get('median', float('nan')):.1f} | "
                    f"{s.get('below_50', '—')} | {_pm(paper)} |"
                )
        if r.get("skipped"):
            L += ["", f"Skipped (pyRiemann not installed): {', '.join(r['skipped'])}."]
        L += [""]

    if "exp2" in results:
        r = results["exp2"]
        L += [
            "## 2. Alignment vs dimension (paper: main comparison figure)",
            "",
            "![alignment vs dimension](alignment_vs_dimension.png)",
            "",
            f"Median [IQR] alignment in % over {r['config']['trials']} trials "
            "(paper: 25) per cell; "
            "n = d / c.",
            "",
        ]
        L += [
            "| c | π₁ | d | " + " | ".join(r["methods"]) + " |",
            "|---|---|---|" + "---|" * len(r["methods"]),
        ]
        for cell in r["cells"]:
            L.append(
                f"| {cell['c']:g} | {cell['pi']:.0%} | {cell['d']} | "
                + " | ".join(
                    "{median:.0f} [{q1:.0f}, {q3:.0f}]".format(**cell["methods"][m])
                    for m in r["methods"]
                )
                + " |"
            )
        L += [""]

    if "exp3" in results:
        r = results["exp3"]
        cfg = r["config"]
        L += [
            "## 3. Mean shift plus covariance shift (paper: appendix table)",
            "",
            f"d = {cfg['d']}, n = {cfg['n']}; mean ± std in % over "
            f"{cfg['trials']['default']} trials (paper: 100). Paper's mean in brackets. "
            "'MS-PCA (any stable)' is the best alignment among all of MS-PCA's stable "
            "components (a diagnostic, not an estimator).",
            "",
        ]
        ms = r["methods"]
        L += ["| (π₁, ℓ₂) | " + " | ".join(ms) + " |", "|---|" + "---|" * len(ms)]
        for key, row in r["table"].items():
            pi, l2 = (float(x) for x in key.split("|"))
            paper = PAPER_EXP3.get((pi, l2), {})
            cells = []
            for m in ms:
                p = paper.get(m)
                cells.append(_ms(row[m]) + (f" ({p[0]:.1f})" if p else ""))
            L.append(f"| ({pi:.0%}, {l2:g}) | " + " | ".join(cells) + " |")
        L += [""]

    if "exp4" in results:
        r = results["exp4"]
        L += [
            "## 4. Eigenvector residual order, c = 1 (paper: appendix residual tables)",
            "",
            "![residual order](residual_order.png)",
            "",
            "Residual ‖S ũ − λ̃ũ‖ of an eigenpair (ũ, λ̃) of the contaminated S̃ = X̃ᵀX̃/n "
            "measured with the *clean* sample covariance S (paper Table 'Eigenvector Residual "
            "Order'). `covariance pair`: the eigenpair of S̃ closest to the clean top "
            "eigenvector — the paper's 'λ̃ not in the neighbourhood of Λ_A', known by "
            "construction; mean ± std over trials, max in brackets. `MS-PCA stable`: mean over "
            "trials of the largest residual among the pairs `mspca_dask.fit(location=None)` "
            "judges stable, max in brackets, and in how many trials the covariance pair was "
            "among them. `clean u`: ‖S̃u − λu‖ for the clean top eigenpair (u, λ), mean ± std "
            "(paper's mean ± std table). `solver`: largest ‖S̃ũ − λ̃ũ‖ (how exact ũ itself is).",
            "",
        ]
        L += [
            "| π₁ | d = n | trials | covariance pair (ours) | paper (max) | MS-PCA stable "
            "| cov. pair judged stable | clean u (ours) | clean u (paper) | solver |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in r["table"]:
            pp = PAPER_EXP4_MAX.get(row["pi"], {}).get(row["d"])
            pc = PAPER_EXP4_CLEAN.get(row["pi"], {}).get(row["d"])
            oracle = (
                f"{_sci(row['oracle_residual_mean'])} ± {_sci(row['oracle_residual_std'])} "
                f"({_sci(row['oracle_residual_max'])})"
                if "oracle_residual_mean" in row
                else "—"
            )
            stable = (
                f"{_sci(row['mean_stable_residual'])} ({_sci(row['max_stable_residual'])})"
                if row["mean_stable_residual"] is not None
                else "none stable"
            )
            L.append(
                f"| {row['pi']:.1%} | {row['d']} | {row['trials']} | {oracle} | {_sci(pp)} | "
                f"{stable} | {row.get('oracle_judged_stable', '—')}/{row['trials']} | "
                f"{_sci(row['clean_residual_mean'])} ± {_sci(row['clean_residual_std'])} | "
                f"{'—' if pc is None else f'{_sci(pc[0])} ± {_sci(pc[1])}'} | "
                f"{_sci(row['max_solver_residual'])} |"
            )
        L += [""]

    if "exp5" in results:
        r = results["exp5"]
        L += [
            f"## 5. Runtime, d = {r['config']['d']}, n = {r['config']['n']} "
            "(paper: appendix runtime table)",
            "",
            f"Milliseconds, mean ± std over {r['config']['repeats']} runs after one warm-up "
            f"({r['config']['slow_repeats']} for the M-estimators); one process, default BLAS "
            "threads (2). Load average during the timings: "
            f"{', '.join(f'{x:.1f}' for x in r.get('load_average', []))}. "
            "Paper: `%timeit` on 256 cores; its Tyler and Huber columns timed pyRiemann's "
            "defaults, so they stand beside both our rows.",
            "",
        ]
        L += [
            "| method | 1 PC (ours) | 1 PC (paper) | 9 PCs (ours) | 9 PCs (paper) |",
            "|---|---|---|---|---|",
        ]
        for m, cases in r["table"].items():
            cells = []
            for case in ("1 PC", "9 PCs"):
                v, pv = cases.get(case), PAPER_EXP5[case].get(m)
                cells.append("—" if v is None else f"{v['mean_ms']:.1f} ± {v['std_ms']:.1f}")
                cells.append("N/A" if pv is None else f"{pv[0]:g} ± {pv[1]:g}")
            L.append(f"| {m} | " + " | ".join(cells) + " |")
        L += [""]

    L += [NOTES.strip(), ""]
    (out / "RESULTS.md").write_text("\n".join(L))
    if "exp2" in results:
        plot_exp2(results["exp2"], out / "alignment_vs_dimension.png")
    if "exp4" in results:
        plot_exp4(results["exp4"], out / "residual_order.png")


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes and 2 trials: a smoke test")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default benchmarks/paper/; with --quick a new temporary folder)",
    )
    ap.add_argument(
        "--only",
        nargs="+",
        choices=EXPERIMENTS,
        default=None,
        help="run these experiments and keep the stored results of the others",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes for the trials (default: CPU count; quick: 1)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="exp1: run only the fits missing from results.json (e.g. after raising a trial count)",
    )
    ap.add_argument(
        "--report",
        action="store_true",
        help="only rewrite RESULTS.md and the figures from results.json",
    )
    args = ap.parse_args(argv)

    out = args.out or (Path(tempfile.mkdtemp(prefix="paper-quick-")) if args.quick else HERE)
    out.mkdir(parents=True, exist_ok=True)
    store = out / "results.json"
    fresh = args.quick and not args.resume  # a quick run starts from nothing unless resumed
    results: dict[str, Any] = json.loads(store.read_text()) if store.exists() and not fresh else {}
    if args.report:
        write_report(results, out)
        print(f"wrote {out / 'RESULTS.md'}")
        return 0

    cfgs = QUICK if args.quick else FULL
    workers = args.workers or (1 if args.quick else (os.cpu_count() or 1))
    todo = args.only or list(EXPERIMENTS)
    meta = results.get("meta", {})
    meta.update(machine())
    meta.update({"quick": args.quick, "workers": workers})
    meta.setdefault("seconds", {})
    results["meta"] = meta
    log_path = out / "run.log"

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        with open(log_path, "a") as fh:
            fh.write(line + "\n")

    fns = {"exp1": exp1, "exp2": exp2, "exp3": exp3, "exp4": exp4, "exp5": exp5}
    log(f"start {todo} → {out} (quick={args.quick}, workers={workers})")
    status = 0
    for name in todo:
        t0 = time.perf_counter()
        try:
            if name == "exp1" and args.resume:
                results[name] = exp1(cfgs[name], workers, log, previous=results.get("exp1"))
            else:
                results[name] = fns[name](cfgs[name], workers, log)
        except Exception:
            log(f"{name} FAILED:\n{traceback.format_exc()}")
            status = 1
            continue
        meta["seconds"][name] = time.perf_counter() - t0
        log(f"{name} done in {meta['seconds'][name]:.0f} s")
        store.write_text(json.dumps(results, indent=1, default=float))
        write_report(results, out)
    log(f"wrote {store} and {out / 'RESULTS.md'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
