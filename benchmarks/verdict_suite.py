"""The verdict suite: today's verdict on a fixed set of null, power and real data families.

For each family of :mod:`mspca_dask.testing.families` and each trial seed, fit
``mspca_dask.fit(X)`` with every library default and record, per fit:

* ``flagged``: any eigenpair with the verdict "mean shift"; ``undetermined``: any with
  "undetermined"; ``grouped``: the group test declared displaced groups;
* ``ez2``: the mean of ``shift_z²`` over the "covariance" eigenpairs where it is defined
  (None when there is none);
* ``cos``: ``|cos|`` of the first covariance component (``res.components[0]``) with the
  clean top covariance PC (0 when no component is stable); ``failure``: ``cos < 0.5``;
* ``detected``: every shifted group's direction is flagged, i.e. the span of the eigenvectors
  that are neither covariance nor bulk holds at least half of its squared norm
  (``captured``: that share per group); ``found``: at least half of every shifted group's
  samples are outside the inliers' group; ``as_covariance``: a stable component has
  ``|cos| ≥ 0.5`` with a shift direction;
* the seconds of the fit (data generation excluded), its passes, solver and warnings, and
  the passes of the same fit with ``location=None`` (the target: at most one more).

Summaries per family: the false-flag rate (null families: a flag is false), the mean of
``ez2``, the failure rate, the detection rate (power and real families).

``--mean-centred`` fits every family less its column means, as standardised data come: the
origin is then the sample mean and says nothing of the inliers' centre (the verdict rests on
the scores' shape); it writes ``…_mean_centred.*``.

Seeds: the design seeds are 0, 1, ...; ``--held-out`` runs the held-out block from
``HELD_OUT_START`` instead and writes ``verdict_suite_held_out.*``.  A held-out block is run
once, on a finished model; a model changed after its run gets a fresh block.  Trials run
seed by seed across all families, so an interrupted run has the same number of trials in every
family; ``--resume`` keeps the stored fits of the same commit and runs the missing ones.

Run:  python benchmarks/verdict_suite.py [--trials 25] [--big-trials 5] [--quick]
                                         [--families NAME ...] [--resume] [--held-out]
                                         [--mean-centred]
Writes benchmarks/results/verdict_suite.md and verdict_suite.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _bench import (  # noqa: E402
    RESULTS,
    SHARED_NOTE,
    finish_info,
    git_commit,
    machine_info,
    machine_line,
    wilson,
)

import mspca_dask  # noqa: E402
from mspca_dask.testing import FAMILIES, Draw, family  # noqa: E402

HELD_OUT_START = 1_100_000
#: Families fitted from a Zarr store (float32, row chunks) rather than from memory.
FROM_ZARR = ("N-big",)
QUICK_FAMILIES = ("N-iso", "P-paper-10")
#: |cos| below which the first covariance component misses the clean top PC.
FAILURE_COS = 0.5
#: Share of a shift direction's squared norm the flagged span must hold for it to count found.
FOUND_SHARE = 0.5

HOW_TO_READ = (
    "How to read the tables. Each row is one family of `mspca_dask.testing.families`, "
    "fitted with `mspca_dask.fit(X)` and every library default (K = 10, location='auto', "
    "random_state=0), once per trial seed; only the data change between trials. "
    "*flagged*: share of fits with at least one eigenpair whose verdict is mean shift; in a "
    "null family every flag is false, so this is the false-flag rate. *grouped*: share of fits "
    "in which the group test declared displaced groups (its level is 5 %). *undetermined*: "
    "share of fits with an undetermined eigenpair. "
    "*E z²*: mean of shift_z² over every eigenpair called covariance where shift_z is defined "
    "(a displaced group was found), pooled over fits (about 1: shift_z is N(0, 1) on a "
    "covariance pair); n: how many such pairs. "
    "*failure*: share of fits whose first covariance component (`res.components[0]`: "
    "the stable components by their variance within the groups) has |cos| < 0.5 with the top "
    "eigenvector of the clean sample covariance (the data without the mean-shift term), or "
    "that have no stable component. *cos(clean, u₁)*: median |cos| between that clean top "
    "eigenvector and the population's first spike direction; where it is small the clean top "
    "PC is a direction of the noise (AR noise, a power-law bulk, a noisier batch), not u₁. "
    "*detected*: share of fits in which every shifted group's direction is flagged (the span "
    "of the eigenvectors called mean shift, mixed or undetermined holds at least half of its "
    "squared norm); *captured*: mean of that share over groups and fits. *found*: share of fits "
    "in which at least half of every shifted group's samples are outside the inliers' group. "
    "*as covariance*: share of fits with a stable component at |cos| ≥ 0.5 to a shift "
    "direction (the minority returned as covariance); where the shift itself lies along the "
    "inliers' covariance it also counts a right covariance component (a shift at 45° to a "
    "spike lies at |cos| 0.71 to it; a real minority's mean can lie along the main class's "
    "own principal axes). Brackets: Wilson 95 % intervals. Times "
    "are seconds per fit (median), data generation excluded. *passes*: the fit's reads of the "
    "data (median); in brackets the median of the same fits with `location=None` (the "
    "location step and the groups' within-group covariance cost the difference) and the "
    "largest excess of one fit over its `location=None` twin."
)


# ---------------------------------------------------------------------- one fit
def measure(
    draw: Draw, *, zarr_dir: str | None = None, mean_centred: bool = False
) -> dict[str, Any]:
    """Fit ``draw`` with the library defaults and measure the verdict against its truth;
    ``mean_centred``: the data less their column means, as standardised data are."""
    truth = draw.truth
    source: Any
    if mean_centred:
        source = draw.to_numpy()
        source -= source.mean(axis=0)
    elif zarr_dir is not None:
        source = draw.write_zarr(str(Path(zarr_dir) / f"{draw.family}-{draw.seed}.zarr"))
    else:
        source = draw.to_numpy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        res = mspca_dask.fit(source)
        seconds = time.perf_counter() - t0
        passes_uncentred = int(mspca_dask.fit(source, location=None).n_passes)
    if zarr_dir is not None and not mean_centred:
        shutil.rmtree(source, ignore_errors=True)
    stable = np.asarray(res.stable, dtype=bool)
    candidate = np.asarray(res.candidate, dtype=bool)
    verdicts = np.asarray(res.verdicts).astype(str)
    flagged_mask = verdicts == "mean shift"
    vecs = np.asarray(res.eigenvectors, dtype=float)
    z = np.asarray(res.shift_z, dtype=float) if res.shift_z is not None else np.zeros(0)
    covz = z[(verdicts == "covariance") & np.isfinite(z)] if z.size else np.zeros(0)
    first = np.asarray(res.components, dtype=float)[:1]  # the first covariance component
    cos = float(abs(first[0] @ truth.clean_top)) if first.size else 0.0
    U = truth.covariance_directions
    cos_u1 = float(abs(first[0] @ U[:, 0])) if first.size and U.shape[1] else None
    F = vecs[~np.isin(verdicts, ("covariance", "bulk"))]  # orthonormal rows
    shifts = truth.shift_directions
    captured = [float(np.sum((F @ shifts[:, g]) ** 2)) for g in range(truth.n_groups)]
    groups = getattr(res, "groups", None)
    labels = np.zeros(draw.shape[0], dtype=int) if groups is None else np.asarray(groups)
    recall = [float(np.mean(labels[truth.membership == g + 1] > 0)) for g in range(truth.n_groups)]
    as_cov = bool(truth.n_groups) and bool(
        stable.any() and np.any(np.abs(vecs[stable] @ shifts) >= FAILURE_COS)
    )
    return {
        "family": draw.family,
        "seed": draw.seed,
        "flagged": bool(flagged_mask.any()),
        "n_flagged": int(flagged_mask.sum()),
        "undetermined": bool(np.any(verdicts == "undetermined")),
        "grouped": bool(labels.max(initial=0) > 0),
        "n_candidates": int(candidate.sum()),
        "n_stable": int(stable.sum()),
        "verdicts": verdicts.tolist(),
        "covariance_z": [round(float(v), 4) for v in covz],
        "cos": cos,
        "cos_u1": cos_u1,
        "clean_cos_u1": float(abs(truth.clean_top @ U[:, 0])) if U.shape[1] else None,
        "failure": cos < FAILURE_COS,
        "captured": captured,
        "detected": bool(captured) and min(captured) >= FOUND_SHARE,
        "group_recall": recall,
        "found": bool(recall) and min(recall) >= FOUND_SHARE,
        "as_covariance": as_cov,
        "seconds": seconds,
        "n_passes": int(res.n_passes),
        "n_passes_uncentred": passes_uncentred,
        "solver": res.solver,
        "warnings": sorted({type(w.message).__name__ for w in caught}),
    }


# ---------------------------------------------------------------------- summaries
def summarise(name: str, fits: list[dict[str, Any]]) -> dict[str, Any]:
    fam = FAMILIES[name]
    n = len(fits)

    def rate(key: str) -> dict[str, Any]:
        k = sum(bool(f[key]) for f in fits)
        return {"count": k, "rate": k / n if n else None, "wilson95": wilson(k, n)}

    covz = np.array([z for f in fits for z in f["covariance_z"]])
    clean = [f["clean_cos_u1"] for f in fits if f["clean_cos_u1"] is not None]
    captured = [c for f in fits for c in f["captured"]]
    return {
        "family": name,
        "kind": fam.kind,
        "description": fam.description,
        "shape": list(fam.shape),
        "trials": n,
        "seeds": sorted(f["seed"] for f in fits),
        "flagged": rate("flagged"),
        "ez2_mean": float(np.mean(covz**2)) if covz.size else None,
        "ez2_pairs": int(covz.size),
        "grouped": rate("grouped"),
        "undetermined": rate("undetermined"),
        "found": rate("found") if fam.kind != "null" else None,
        "as_covariance": rate("as_covariance") if fam.kind != "null" else None,
        "failure": rate("failure"),
        "detected": rate("detected") if fam.kind != "null" else None,
        "captured_mean": float(np.mean(captured)) if captured else None,
        "cos_median": float(np.median([f["cos"] for f in fits])) if fits else None,
        "clean_cos_u1_median": float(np.median(clean)) if clean else None,
        "seconds_median": float(np.median([f["seconds"] for f in fits])) if fits else None,
        "passes_median": float(np.median([f["n_passes"] for f in fits])) if fits else None,
        "passes_uncentred_median": (
            float(np.median([f["n_passes_uncentred"] for f in fits])) if fits else None
        ),
        "passes_excess_max": (
            int(max(f["n_passes"] - f["n_passes_uncentred"] for f in fits)) if fits else None
        ),
    }


def _pct(r: dict[str, Any] | None) -> str:
    if r is None or r["rate"] is None:
        return "—"
    lo, hi = r["wilson95"]
    return f"{100 * r['rate']:.0f} % ({r['count']}) [{100 * lo:.0f}, {100 * hi:.0f}]"


def _ez2(s: dict[str, Any]) -> str:
    return "—" if s["ez2_mean"] is None else f"{s['ez2_mean']:.2f} ({s['ez2_pairs']})"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "—" if x is None else format(x, fmt)


def _passes(s: dict[str, Any]) -> str:
    """Median passes, with ``location=None``'s median and the largest excess of a fit."""
    if s["passes_median"] is None:
        return "—"
    return (
        f"{s['passes_median']:.0f} ({_num(s['passes_uncentred_median'], '.0f')}, "
        f"{s['passes_excess_max']:+d})"
    )


def render(payload: dict[str, Any]) -> list[str]:
    meta = payload["meta"]
    md = [
        f"# Verdict suite{' (held-out seeds)' if meta['held_out'] else ''}"
        + (", every family centred on its own mean" if meta.get("mean_centred") else ""),
        "",
        f"Command: `{meta['command']}`",
        f"Commit: {meta['commit']}",
        f"Machine: {machine_line(meta)}",
        "",
        f"Seeds: {meta['seed_note']}",
        "",
        SHARED_NOTE,
        "",
        HOW_TO_READ,
        "",
    ]
    rows = payload["summary"]
    md += [
        "## Null families (no mean shift: every flag is false)",
        "",
        "| family | n × d | trials | flagged (false-flag rate) | grouped | undetermined | "
        "E z² (n) | failure | cos(clean, u₁) | s/fit | passes (location=None, worst excess) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        if s["kind"] == "null":
            md.append(
                f"| {s['family']} | {s['shape'][0]} × {s['shape'][1]} | {s['trials']} | "
                f"{_pct(s['flagged'])} | {_pct(s['grouped'])} | {_pct(s['undetermined'])} | "
                f"{_ez2(s)} | {_pct(s['failure'])} | "
                f"{_num(s['clean_cos_u1_median'])} | {_num(s['seconds_median'], '.1f')} | "
                f"{_passes(s)} |"
            )
    for kind, title in (("power", "Power families (mean-shifted groups)"), ("real", "Real data")):
        if not any(s["kind"] == kind for s in rows):
            continue
        md += [
            "",
            f"## {title}",
            "",
            "| family | n × d | trials | failure | detected | captured | found | as covariance | "
            "undetermined | E z² (n) | cos(clean, u₁) | s/fit | "
            "passes (location=None, worst excess) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in rows:
            if s["kind"] == kind:
                md.append(
                    f"| {s['family']} | {s['shape'][0]} × {s['shape'][1]} | {s['trials']} | "
                    f"{_pct(s['failure'])} | {_pct(s['detected'])} | "
                    f"{_num(s['captured_mean'])} | {_pct(s['found'])} | "
                    f"{_pct(s['as_covariance'])} | {_pct(s['undetermined'])} | "
                    f"{_ez2(s)} | {_num(s['clean_cos_u1_median'])} | "
                    f"{_num(s['seconds_median'], '.1f')} | {_passes(s)} |"
                )
    md += ["", "## Families", ""]
    md += [f"* **{s['family']}** ({s['kind']}): {s['description']}." for s in rows]
    return md


# ---------------------------------------------------------------------- driver
def _commit() -> str:
    """The full commit, ``+dirty`` when the library's files differ from it (what a resume
    compares: a fit made on other library code is not reused)."""
    return git_commit(short=False, paths=("mspca_dask",)) or "unknown"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=25, help="trials per family (default 25)")
    ap.add_argument("--big-trials", type=int, default=5, help="trials of N-big (default 5)")
    ap.add_argument("--quick", action="store_true", help="1 trial of N-iso and P-paper-10")
    ap.add_argument("--families", nargs="+", choices=list(FAMILIES), help="only these")
    ap.add_argument("--resume", action="store_true", help="keep stored fits of this commit")
    ap.add_argument("--held-out", action="store_true", help=f"the held-out seeds {HELD_OUT_START}+")
    ap.add_argument(
        "--mean-centred",
        action="store_true",
        help="fit every family less its column means (as standardised data), from memory",
    )
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)

    names = list(QUICK_FAMILIES) if args.quick else (args.families or list(FAMILIES))
    trials = 1 if args.quick else args.trials
    big_trials = min(trials, args.big_trials)
    first = HELD_OUT_START if args.held_out else 0
    stem = "verdict_suite_held_out" if args.held_out else "verdict_suite"
    if args.mean_centred:
        stem += "_mean_centred"
    commit = _commit()

    given = list(argv if argv is not None else sys.argv[1:])
    if "--out" in given:  # no path of the machine is recorded
        i = given.index("--out")
        del given[i : i + 2]
    meta = machine_info()
    meta.update(
        command=" ".join(["python benchmarks/verdict_suite.py", *given]),
        commit=commit,
        quick=args.quick,
        held_out=args.held_out,
        mean_centred=args.mean_centred,
        trials=trials,
        big_trials=big_trials,
        seed_note=(
            f"{'held-out' if args.held_out else 'design'} seeds {first}..{first + trials - 1} "
            f"({trials} trials per family; {', '.join(FROM_ZARR)}: {big_trials}, "
            + (
                "every family less its column means, fitted from memory)"
                if args.mean_centred
                else "fitted from a float32 Zarr store in row chunks of 10,000)"
            )
        ),
    )
    fits: list[dict[str, Any]] = []
    json_path = args.out / f"{stem}.json"
    if args.resume and json_path.is_file():
        stored = json.loads(json_path.read_text())
        if stored["meta"]["commit"] == commit:
            fits = [f for f in stored["fits"] if f["family"] in names]
    done = {(f["family"], f["seed"]) for f in fits}

    def write() -> None:
        by_family = {name: [f for f in fits if f["family"] == name] for name in names}
        payload: dict[str, Any] = {
            "meta": {**meta, "load_average_end": None},
            "summary": [summarise(name, by_family[name]) for name in names],
            "fits": sorted(fits, key=lambda f: (names.index(f["family"]), f["seed"])),
        }
        finish_info(payload["meta"])
        args.out.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(payload, indent=1, default=float) + "\n")
        (args.out / f"{stem}.md").write_text("\n".join(render(payload)) + "\n")

    zarr_dir = tempfile.mkdtemp(prefix="verdict-suite-")
    try:
        for t in range(trials):  # seed by seed across families: every family advances alike
            seed = first + t
            for name in names:
                if (name, seed) in done or (name in FROM_ZARR and t >= big_trials):
                    continue
                draw = family(name).draw(seed)
                fit = measure(
                    draw,
                    zarr_dir=zarr_dir if name in FROM_ZARR else None,
                    mean_centred=args.mean_centred,
                )
                fits.append(fit)
                print(
                    f"{name} seed {seed}: flagged {fit['n_flagged']}, cos {fit['cos']:.3f}, "
                    f"detected {fit['detected']}, {fit['seconds']:.1f} s",
                    flush=True,
                )
            write()
    finally:
        shutil.rmtree(zarr_dir, ignore_errors=True)
    write()


if __name__ == "__main__":
    main()
