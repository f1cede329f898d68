"""Verdicts on simulated genotype cohorts: is every population axis flagged, and how many
covariance PCs are flagged with it?

    python benchmarks/genotype_verdicts.py               # every cohort, 3 seeds
    python benchmarks/genotype_verdicts.py --seeds 1     # one seed each
    python benchmarks/genotype_verdicts.py --only ooa4   # one cohort

Each cohort is a majority population with minorities, simulated with stdpopsim (HomSap,
chr22 from 10 Mb, msprime) and written as VCF Zarr by bio2zarr's tskit2zarr
(:func:`mspca_dask.genomics.simulate_cohort`, cached under ``benchmarks/_data/``).  The
genomics job runs on it twice with its defaults (MAF >= 0.05, 10 components, 5 knockoffs):
with the majority population as the reference, and with no reference (``location="auto"``).

What a PC *is* comes from the simulation's population labels, not from the method: the share
of its sample scores' variance that lies between the populations (η², the correlation ratio).
A PC with η² >= 0.5 is a **population axis** (a mean shift between populations: it should be
flagged, as a mean shift or as mixed); a PC with η² < 0.1 is a **covariance PC**
(within-population structure: linkage, relatedness, noise; it should stay stable); PCs in
between are listed, not scored.  These
demographic models have no structure inside a population, so nothing below the population
axes is a real within-population axis: a flag there is a false flag.

Results: ``benchmarks/results/genotype_verdicts.json``, rendered as ``genotype_verdicts.md``;
``python benchmarks/genotype_verdicts.py --render`` rewrites the Markdown from the stored JSON
and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _bench import RESULTS, commit_line, dump, finish_info, machine_info, machine_line  # noqa: E402

DATA = Path(__file__).resolve().parent / "_data"
K = 10
POPULATION_AXIS = 0.5  # η² at or above: a population axis
COVARIANCE_PC = 0.1  # η² below: a covariance PC
#: verdicts that say the groups are shifted along a PC (mixed: and it carries a spike within
#: them, as an admixture cline does within an admixed population)
FLAGGED = ("mean shift", "mixed")

#: name → (demographic model, populations, region length in bp, reference population)
COHORTS: dict[str, tuple[str, dict[str, int], float, str]] = {
    "ooa3-232": ("OutOfAfrica_3G09", {"CEU": 200, "YRI": 20, "CHB": 12}, 20e6, "CEU"),
    "ooa3-1000": ("OutOfAfrica_3G09", {"CEU": 800, "YRI": 100, "CHB": 100}, 20e6, "CEU"),
    "ooa3-big-minorities": ("OutOfAfrica_3G09", {"CEU": 500, "YRI": 250, "CHB": 250}, 20e6, "CEU"),
    "ooa4": ("OutOfAfrica_4J17", {"CEU": 600, "YRI": 60, "CHB": 60, "JPT": 60}, 20e6, "CEU"),
    # an admixed population between the reference and two others
    "admix4": (
        "AmericanAdmixture_4B18",
        {"EUR": 600, "AFR": 60, "ASIA": 60, "ADMIX": 60},
        20e6,
        "EUR",
    ),
    # a large admixed population that reaches the reference, between it and the two others
    "admix4-big-admixed": (
        "AmericanAdmixture_4B18",
        {"EUR": 400, "AFR": 80, "ASIA": 80, "ADMIX": 160},
        20e6,
        "EUR",
    ),
}


def eta_squared(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Between-population share of each column's variance, (n, K) → (K,)."""
    from mspca_dask.verdict import between_group_share

    return between_group_share(scores, np.unique(labels, return_inverse=True)[1].ravel())


def simulate(name: str, seed: int) -> dict[str, Any]:
    from mspca_dask import genomics as gx

    model, pops, length, _ = COHORTS[name]
    cfg = gx.SimulateConfig(
        model=model,
        populations=pops,
        left=10_000_000.0,
        length=length,
        seed=seed,
        variants_chunk_size=5_000,
    )
    tag = f"gv-{name}-s{seed}"
    t0 = time.perf_counter()
    sim = gx.simulate_cohort(DATA / f"{tag}.vcz", metadata=DATA / f"{tag}.tsv", config=cfg)
    sim["seconds"] = time.perf_counter() - t0
    return sim


def run_job(sim: dict[str, Any], reference: str | None, out: Path) -> dict[str, Any]:
    from mspca_dask import genomics as gx

    raw: dict[str, Any] = {
        "job": {"name": out.name},
        "input": {"store": sim["store"], "sample_metadata": sim["metadata"]},
        "qc": {"min_maf": 0.05},
        "pca": {"n_components": K},
        "compute": {"scheduler": "threads"},
        "output": {"dir": str(out)},
        "report": {"enabled": False},
    }
    if reference is not None:
        raw["reference"] = {"metadata_column": "population", "metadata_values": [reference]}
    t0 = time.perf_counter()
    outcome = gx.run_job(gx.JobConfig.from_mapping(raw))
    seconds = time.perf_counter() - t0
    ds = outcome.dataset
    included = ds["sample_included"].values
    labels = np.asarray(sim["populations"], dtype=object)[included]
    scores = ds["sample_score"].values[included]
    eta = eta_squared(scores, labels.astype(str))
    verdicts = ds["verdict"].values.astype(str).tolist()
    return {
        "reference": reference,
        "seconds": round(seconds, 1),
        "variants": int(ds.attrs["n_variants_analysed"]),
        "eta2": [round(float(x), 3) for x in eta],
        "verdicts": verdicts,
        "reasons": ds["reason"].values.astype(str).tolist(),
    }


def score(r: dict[str, Any]) -> dict[str, int]:
    """Population axes, covariance PCs and PCs in between, each counted with how many of them
    are flagged (a verdict of :data:`FLAGGED`), from a run's η² and verdicts."""
    eta = np.asarray(r["eta2"], dtype=float)
    flagged = np.isin(np.asarray(r["verdicts"], dtype=str), FLAGGED)
    axis = eta >= POPULATION_AXIS
    cov = eta < COVARIANCE_PC
    return {
        "population_axes": int(axis.sum()),
        "axes_flagged": int((axis & flagged).sum()),
        "covariance_pcs": int(cov.sum()),
        "covariance_flagged": int((cov & flagged).sum()),
        "between": int((~axis & ~cov).sum()),
        "between_flagged": int((~axis & ~cov & flagged).sum()),
    }


def _row(name: str, seed: int, r: dict[str, Any]) -> str:
    mark = {"mean shift": "*", "mixed": "+"}
    pc = " ".join(
        f"{e:.2f}{mark.get(v, '')}" for e, v in zip(r["eta2"], r["verdicts"], strict=True)
    )
    c = score(r)
    return (
        f"| {name} | {seed} | {r['reference'] or 'none (auto)'} | {r['variants']:,} | "
        f"{c['axes_flagged']} / {c['population_axes']} | {c['covariance_flagged']} / "
        f"{c['covariance_pcs']} | {c['between_flagged']} / {c['between']} | "
        f"{'yes' if _met(c) else '**no**'} | {pc} |"
    )


#: The fixed reading of genotype_verdicts.md: what the columns mean, never what a run found.
HOW_TO_READ = [
    "## How to read this file",
    "",
    "Each run simulates a cohort (a majority population with minorities) and runs the "
    "genomics job on it twice with its defaults: with the majority population as the "
    'reference, and with no reference (`location="auto"`). What a PC *is* comes from the '
    "simulation's population labels, not from the method: η², the share of its sample "
    f"scores' variance that lies between the populations. A PC is a *population axis* when "
    f"η² ≥ {POPULATION_AXIS:.1f} (a mean shift between populations: it should be flagged) and "
    f"a *covariance PC* when η² < {COVARIANCE_PC:.1f} (these demographic models have no "
    "structure within a population, so such a PC is linkage, relatedness or noise, and must "
    "stay stable); PCs in between are counted in their own column and not scored. A PC is "
    "*flagged* when its verdict says the groups are shifted along it: mean shift, or mixed "
    "(shifted, and carrying a spike of the covariance within the groups, as an admixture "
    "cline does within an admixed population); a mixed verdict on a covariance PC is a false "
    "flag like a mean shift. A run *meets the target* when every population axis is flagged "
    "and at most one covariance PC in ten is. The last column lists η² of PCs 1-10, a star "
    "marking a mean shift and a plus a mixed verdict. The header gives the command, date, "
    "machine and commit of the run that wrote the JSON. How these verdicts changed from "
    "version to version is in `CHANGELOG.md` "
    '("History of the accuracy study"), not here. '
    "`python benchmarks/genotype_verdicts.py --render` rewrites this file from "
    "`genotype_verdicts.json`.",
]


def _met(c: dict[str, int]) -> bool:
    """Whether a run's counts (:func:`score`) meet the target."""
    return c["axes_flagged"] == c["population_axes"] and c["covariance_flagged"] <= 1


def render(out: Path) -> list[str]:
    """Rewrite ``out/genotype_verdicts.md`` from ``out/genotype_verdicts.json``."""
    stored = out / "genotype_verdicts.json"
    payload = json.loads(stored.read_text())
    meta, runs = payload["machine"], payload["runs"]
    names = list(dict.fromkeys(r["cohort"] for r in runs))
    command = payload.get("command") or (
        f"python benchmarks/genotype_verdicts.py --seeds {max(r['seed'] for r in runs)}"
        + ("" if set(names) == set(COHORTS) else "".join(f" --only {n}" for n in names))
    )
    counts = [score(r) for r in runs]
    met = [_met(c) for c in counts]
    total = {key: sum(c[key] for c in counts) for key in counts[0]}
    md = [
        "# Verdicts on simulated genotype cohorts",
        "",
        *HOW_TO_READ,
        "",
        "## The run",
        "",
        f"- Command: `{command}`",
        f"- Date: {meta['date']}",
        f"- Machine: {machine_line(meta).split('. Date ')[0]}; load average (1, 5, 15 min) "
        f"{meta['load_average_start']} at the start, {meta.get('load_average_end')} at the end",
        f"- Commit: {commit_line(meta, stored)}",
        "",
        "Cohorts: stdpopsim HomSap, chr22 10-30 Mb, msprime, VCF Zarr by bio2zarr's tskit2zarr; "
        + "; ".join(f"**{n}**: {m} {p}" for n, (m, p, _, _) in COHORTS.items() if n in names)
        + f". The genomics job with its defaults (MAF >= 0.05, K = {K}, 5 knockoffs, report "
        "off), with the majority population (CEU, EUR) as reference and with none.",
        "",
        "| cohort | seed | reference | variants | axes flagged | covariance PCs flagged | "
        "in between flagged | met | η² per PC (* mean shift, + mixed) |",
        "|---|---|---|---|---|---|---|---|---|",
        *(_row(r["cohort"], r["seed"], r) for r in runs),
        "",
        f"**{sum(met)} of {len(met)} runs meet the target.** Population axes flagged: "
        f"{total['axes_flagged']} of {total['population_axes']}; covariance PCs flagged: "
        f"{total['covariance_flagged']} of {total['covariance_pcs']}.",
    ]
    (out / "genotype_verdicts.md").write_text("\n".join(md) + "\n")
    return md


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", choices=sorted(COHORTS), action="append")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--render",
        action="store_true",
        help="only rewrite genotype_verdicts.md from genotype_verdicts.json",
    )
    args = ap.parse_args(argv)
    if args.render:
        print("\n".join(render(args.out)))
        return 0
    try:
        import msprime  # noqa: F401
        import stdpopsim  # noqa: F401
    except ImportError:
        print("needs the genomics extra (pip install -e '.[genomics]'); skipping.")
        return 0
    meta = machine_info()
    names = args.only or list(COHORTS)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="mspca-gv-") as tmp:
        for name in names:
            for seed in range(1, args.seeds + 1):
                sim = simulate(name, seed)
                for ref in (COHORTS[name][3], None):
                    out = Path(tmp) / f"{name}-s{seed}-{ref or 'auto'}"
                    r = run_job(sim, ref, out)
                    r.update(cohort=name, seed=seed, simulated_seconds=round(sim["seconds"], 1))
                    runs.append(r)
                    print(_row(name, seed, r), flush=True)
    finish_info(meta)
    command = f"python benchmarks/genotype_verdicts.py --seeds {args.seeds}" + "".join(
        f" --only {n}" for n in args.only or []
    )
    dump("genotype_verdicts", args.out, {"command": command, "machine": meta, "runs": runs}, [])
    print("\n".join(render(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
