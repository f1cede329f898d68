"""How often the verdict's group test declares a near-balanced cluster, and its Gaussian twin.

The setting: d = 900, n = 1000, one covariance spike ℓ = 2√c and one cluster of 45 % of the
samples at θ² = 4√c.  A cluster that holds nearly half the samples is the hardest case for a
group test: its two modes sit close to one unimodal bump.

Two data sets are drawn per trial:

* the cluster model (seeds 5000 + t, as in ``accuracy.py``);
* its *Gaussian twin*: the same covariance spike, with the cluster replaced by a Gaussian
  covariance spike of the same variance, π(1 − π)‖m‖² = (1 − π)θ², along its own direction
  (seeds 6000 + t).  No sample is shifted, so any group declared in it is false.

Both go through the verdict's group test (:func:`mspca_dask.verdict.fit_groups`, seed t) on
the scores on the top two sample eigenvectors of the mean-centred data; it records whether
groups were declared, its statistic (the BIC gain of the best Gaussian mixture over one
Gaussian), its Monte Carlo p-value and the number of twins it drew.  The Monte Carlo
calibration is inside the test: it compares the data's gain with that of up to
``⌈1/α⌉ − 1`` unimodal twins of the scores (:mod:`mspca_dask.verdict.twins`), so this script
draws none of its own.

For each cluster trial it also records the *oracle* ratio: twice the log-likelihood ratio of
the true two-group mixture (the true members' means, pooled variance and weight) against one
Gaussian, along the direction that best separates the true members within the top-two span
(Fisher's, from the true labels): what a test that knew the labels would have to go on.  And
it fits the cluster data with ``mspca_dask.fit(X)`` and every default, recording whether a
pair got the verdict "mean shift" or "mixed", the alignment |cos| of the first stable
component with the top eigenvector of the clean sample covariance (a *failure* below 0.5),
and the share of the cluster's samples outside the inliers' group.

Run by hand (not in CI), about 15 minutes on 2 cores::

    python benchmarks/detection_limits.py [--trials 40]
    python benchmarks/detection_limits.py --render   # rewrite the .md from the stored .json

Writes ``benchmarks/results/detection_limits.json`` and ``detection_limits.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (  # noqa: E402
    RESULTS,
    commit_line,
    finish_info,
    git_commit,
    machine_info,
    machine_line,
    wilson,
)

#: n, d and the cluster's weight π: a near-balanced cluster at the paper's scaling.
N, D, PI = 1000, 900, 0.45
C = D / N
#: The covariance spike ℓ and the cluster's strength θ² (the paper's scaling).
SPIKE, STRENGTH = 2 * math.sqrt(C), 4 * math.sqrt(C)
#: Alignment below which the first stable component misses the clean top eigenvector.
FAILURE_ALIGNMENT = 0.5
#: Files the results are written to, in ``--out``.
STEM = "detection_limits"

#: The fixed reading of detection_limits.md: what the rows mean, never what a run found.
HOW_TO_READ = [
    "## How to read this file",
    "",
    f"Each trial draws two data sets of n = {N} samples and d = {D} features: a *cluster* "
    f"(one covariance spike ℓ = 2√c and one cluster of {PI * 100:.0f} % of the samples at "
    "θ² = 4√c, c = d/n, seeds 5000 + t) and "
    "its *Gaussian twin* (the same spike, and the cluster replaced by a Gaussian covariance "
    "spike of the same variance, (1 − π)θ², seeds 6000 + t: no sample is shifted, so a group "
    "declared there is false). The verdict's group test (`mspca_dask.verdict.fit_groups`, "
    "level 5 %, seed t) runs on the scores on the top two sample eigenvectors of the "
    "mean-centred data; its null distribution comes from up to 19 unimodal twins of those "
    "scores that it draws itself. *Cluster found*: the test declared groups in the cluster "
    "data; *twin given a group*: it declared groups in the Gaussian twin (the false-group "
    "rate, whose target is the test's level). The default fit is `mspca_dask.fit(X)` with "
    "every default on the cluster data: *a pair called mean shift or mixed* says the verdict "
    "saw the cluster; a *failure* is a first stable component with |cos| < 0.5 to the top "
    "eigenvector of the clean sample covariance (the data without the shift), or no stable "
    "component; *cluster samples displaced* is the share of the cluster's samples outside the "
    "inliers' group of the fit. The *oracle 2 log LR* is twice the log-likelihood ratio of "
    "the true two-group mixture (the true members' means, pooled variance and weight) "
    "against one Gaussian along Fisher's direction of the true labels in the top-two span: "
    "what a test that knew the labels would have, before paying for its search. Brackets are "
    "Wilson 95 % intervals. How these figures changed from version to version is in "
    "`CHANGELOG.md`, not here. `python benchmarks/detection_limits.py --render` rewrites this "
    "file from `detection_limits.json`.",
]


# ---------------------------------------------------------------------- data
def cluster_model(trial: int):
    """The cluster data of one trial: spike ℓ = 2√c, one cluster of π = 45 % at θ² = 4√c."""
    from mspca_dask.testing import make_spiked_mixture

    return make_spiked_mixture(
        N,
        D,
        covariance_spikes=(SPIKE,),
        mean_shift_weights=(PI,),
        mean_shift_strengths=(STRENGTH,),
        random_state=5000 + trial,
    )


def twin_model(trial: int):
    """The Gaussian twin of one trial: the spike ℓ = 2√c, and the cluster replaced by a
    Gaussian covariance spike of its variance (1 − π)θ²; no cluster."""
    from mspca_dask.testing import make_spiked_mixture

    return make_spiked_mixture(
        N,
        D,
        covariance_spikes=(SPIKE, (1 - PI) * STRENGTH),
        mean_shift_weights=(),
        random_state=6000 + trial,
    )


def top_scores(X: np.ndarray, k: int = 2) -> np.ndarray:
    """(n, k) scores on the top ``k`` sample eigenvectors of the mean-centred data."""
    Xc = X - X.mean(axis=0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:k].T


# ---------------------------------------------------------------------- measures
def group_test(T: np.ndarray, seed: int) -> dict[str, Any]:
    """The verdict's group test on the scores ``T``."""
    from mspca_dask.verdict import fit_groups

    g = fit_groups(T, seed=seed)
    return {
        "found": bool(g.found),
        "statistic": float(g.statistic),
        "p_value": float(g.p_value),
        "n_twins": int(g.n_twins),
    }


def oracle_ratio(T: np.ndarray, members: np.ndarray) -> tuple[float, float]:
    """(2 log LR of the true two-group mixture against a Gaussian, the groups' distance in
    within-group sd) along Fisher's direction of the true labels in the span of ``T``."""
    from scipy import stats

    a, b = T[members], T[~members]
    within = (np.cov(a, rowvar=False) + np.cov(b, rowvar=False)) / 2
    w = np.linalg.solve(np.atleast_2d(within), a.mean(axis=0) - b.mean(axis=0))
    p = T @ w
    p = (p - p.mean()) / p.std()
    ma, mb = p[members].mean(), p[~members].mean()
    var = (p[members].var() * members.sum() + p[~members].var() * (~members).sum()) / p.size
    share = members.mean()
    mix = share * stats.norm.pdf(p, ma, np.sqrt(var)) + (1 - share) * stats.norm.pdf(
        p, mb, np.sqrt(var)
    )
    ratio = 2 * (np.log(mix).sum() - stats.norm.logpdf(p).sum())
    return float(ratio), float((ma - mb) / np.sqrt(var))


def default_fit(model, X: np.ndarray, members: np.ndarray) -> dict[str, Any]:
    """``mspca_dask.fit(X)`` with every default, measured against the model's truth."""
    import mspca_dask
    from mspca_dask.testing import alignment

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = mspca_dask.fit(X)
    verdicts = np.asarray(res.verdicts).astype(str)
    comp = res.components
    truth = model.clean_top_eigenvectors(1)[:, 0]
    cos = float(alignment(comp[0], truth)) if len(comp) else 0.0
    groups = np.zeros(N, dtype=int) if res.groups is None else np.asarray(res.groups)
    return {
        "verdicts": verdicts.tolist(),
        "flagged": bool(np.isin(verdicts, ("mean shift", "mixed")).any()),
        "alignment": cos,
        "failure": cos < FAILURE_ALIGNMENT,
        "members_displaced": float(np.mean(groups[members] > 0)),
        "group_p_value": None if res.group_p_value is None else float(res.group_p_value),
        "warnings": sorted({type(w.message).__name__ for w in caught}),
    }


def cluster_trial(t: int) -> dict[str, Any]:
    model = cluster_model(t)
    X = model.to_numpy()
    T = top_scores(X)
    members = np.asarray(model.membership) != 0
    ratio, distance = oracle_ratio(T, members)
    return {
        "seed": 5000 + t,
        "group_test": group_test(T, t),
        "oracle_ratio": ratio,
        "oracle_distance_sd": distance,
        "fit": default_fit(model, X, members),
    }


def twin_trial(t: int) -> dict[str, Any]:
    T = top_scores(twin_model(t).to_numpy())
    return {"seed": 6000 + t, "group_test": group_test(T, t)}


# ---------------------------------------------------------------------- summary
def _rate(flags: list[bool]) -> dict[str, Any]:
    k, n = sum(flags), len(flags)
    return {"count": k, "trials": n, "rate": k / n if n else None, "wilson95": wilson(k, n)}


def summarise(clusters: list[dict[str, Any]], twins: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "clusters_found": _rate([r["group_test"]["found"] for r in clusters]),
        "twins_with_a_group": _rate([r["group_test"]["found"] for r in twins]),
        "fit_flagged": _rate([r["fit"]["flagged"] for r in clusters]),
        "failures": _rate([r["fit"]["failure"] for r in clusters]),
    }


# ---------------------------------------------------------------------- rendering
def _pct(r: dict[str, Any]) -> str:
    if not r["trials"]:
        return "—"
    lo, hi = r["wilson95"]
    share = f"{100 * r['rate']:.0f} %"
    return f"{r['count']} of {r['trials']} ({share}) [{100 * lo:.0f}, {100 * hi:.0f}]"


def _spread(values: list[float], fmt: str = ".1f") -> str:
    if not values:
        return "—"
    v = np.asarray(values, dtype=float)
    return (
        f"{format(float(np.median(v)), fmt)} ({format(float(v.min()), fmt)} to "
        f"{format(float(v.max()), fmt)})"
    )


def render(payload: dict[str, Any], stored: Path) -> list[str]:
    """The lines of detection_limits.md, from the stored results only."""
    meta, clusters, twins = payload["meta"], payload["clusters"], payload["twins"]
    s = payload["summary"]
    found = [r for r in clusters if r["group_test"]["found"]]
    missed = [r for r in clusters if not r["group_test"]["found"]]
    md = [
        "# Detection limit: a 45 % cluster against its Gaussian twin",
        "",
        *HOW_TO_READ,
        "",
        "## The run",
        "",
        f"- Command: `{payload['command']}`",
        f"- Date: {meta['date']}",
        f"- Machine: {machine_line(meta).split('. Date ')[0]}; load average (1, 5, 15 min) "
        f"{meta['load_average_start']} at the start, {meta.get('load_average_end')} at the end; "
        f"{meta['seconds']} s in all",
        f"- Commit: {commit_line(meta, stored)}",
        "",
        "| measure | trials with it [Wilson 95 %] |",
        "|---|---|",
        f"| cluster found by the group test | {_pct(s['clusters_found'])} |",
        f"| Gaussian twin given a group (false) | {_pct(s['twins_with_a_group'])} |",
        f"| default fit: a pair called mean shift or mixed | {_pct(s['fit_flagged'])} |",
        f"| default fit: failure (alignment < {FAILURE_ALIGNMENT}) | {_pct(s['failures'])} |",
        "",
        "| quantity, median (range) | cluster trials | Gaussian twins |",
        "|---|---|---|",
        "| group test statistic (BIC gain) | "
        f"{_spread([r['group_test']['statistic'] for r in clusters])} | "
        f"{_spread([r['group_test']['statistic'] for r in twins])} |",
        "| group test p-value | "
        f"{_spread([r['group_test']['p_value'] for r in clusters], '.2f')} | "
        f"{_spread([r['group_test']['p_value'] for r in twins], '.2f')} |",
        f"| oracle 2 log LR, clusters found | {_spread([r['oracle_ratio'] for r in found])} | — |",
        "| oracle 2 log LR, clusters missed | "
        f"{_spread([r['oracle_ratio'] for r in missed])} | — |",
        "| groups apart along Fisher's direction (within-group sd) | "
        f"{_spread([r['oracle_distance_sd'] for r in clusters], '.2f')} | — |",
        "| default fit: alignment | "
        f"{_spread([r['fit']['alignment'] for r in clusters], '.3f')} | — |",
        "| default fit: cluster samples displaced | "
        f"{_spread([r['fit']['members_displaced'] for r in clusters], '.2f')} | — |",
    ]
    return md


def write(payload: dict[str, Any], out: Path, *, json_too: bool = True) -> None:
    """Write detection_limits.json (unless ``json_too`` is false) and .md into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    stored = out / f"{STEM}.json"
    if json_too:
        stored.write_text(json.dumps(payload, indent=1) + "\n")
    (out / f"{STEM}.md").write_text("\n".join(render(payload, stored)) + "\n")
    print(f"wrote {out / f'{STEM}.md'}")


# ---------------------------------------------------------------------- driver
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40, help="trials of each model (default 40)")
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder of the results files")
    ap.add_argument(
        "--render", action="store_true", help="rewrite the .md from the stored .json only"
    )
    args = ap.parse_args(argv)
    if args.render:
        write(json.loads((args.out / f"{STEM}.json").read_text()), args.out, json_too=False)
        return 0
    meta = machine_info()
    # the code the numbers come from: the library and this script (other files may differ)
    meta["commit"] = git_commit(
        paths=("mspca_dask", "benchmarks/_bench.py", "benchmarks/detection_limits.py")
    )
    t0 = time.perf_counter()
    clusters, twins = [], []
    for t in range(args.trials):
        clusters.append(cluster_trial(t))
        twins.append(twin_trial(t))
        c, w = clusters[-1], twins[-1]
        print(
            f"trial {t}: cluster {c['group_test']}, oracle {c['oracle_ratio']:.1f}, "
            f"fit flagged {c['fit']['flagged']}, alignment {c['fit']['alignment']:.3f}; "
            f"twin {w['group_test']}",
            flush=True,
        )
    meta["seconds"] = round(time.perf_counter() - t0, 1)
    finish_info(meta)
    payload = {
        "command": f"python benchmarks/detection_limits.py --trials {args.trials}",
        "meta": meta,
        "setting": {
            "n": N,
            "d": D,
            "cluster_weight": PI,
            "covariance_spike": SPIKE,
            "cluster_strength": STRENGTH,
            "twin_spikes": [SPIKE, (1 - PI) * STRENGTH],
        },
        "summary": summarise(clusters, twins),
        "clusters": clusters,
        "twins": twins,
    }
    write(payload, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
