"""Runtime of the in-memory path (the paper's runtime tables) and the ``solver="auto"`` cost model.

1. **Paper, appendix runtime tables**, NumPy input (no store): d = 900, n = 1000 with 1 and 9
   PCs (``n_components`` 2 and 10, as in benchmarks/paper), and d = n from 1000 to 10000
   (largest PC, ``n_components=2``).  Rows: ``mspca_dask.fit`` with its defaults; the exact
   solver with ``location=None`` (the paper's setting); and **the same exact-path work in
   plain NumPy** (Gram product, top-K ``eigh`` of it and of 5 rank-2 knockoff updates, the
   scores product).  The gap between the last two is what Dask and the pass machinery cost.
2. **Cost model** for ``solver="auto"``: ``solver="exact"`` and ``solver="randomized"``
   (``location=None``) timed over a grid of (n, d).  With ``m = max(n, d)``, ``p = min(n, d)``,
   ``B = 5`` knockoffs and Krylov block ``ℓ = K + 10 + B + 3``, the fitted models are

       t_exact = a_gram · m p² + a_eigh · (B + 1) p³ + c_exact
       t_rand  = a_krylov · P m p ℓ + c_pass · P + c_rand

   (P = passes of the randomized solver, the median observed), fitted by non-negative least
   squares on the median times.  The report gives the constants, the crossover dimension
   ``p*`` above which the randomized solver wins for large m, and the smallest m at which the
   exact solver wins for each p.

Run:  python benchmarks/runtime.py [--quick] [--repeats 3]
Writes benchmarks/results/runtime.{md,json,png}.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import dask.array as da
import numpy as np
import scipy.linalg as sla
from _bench import RESULTS, SHARED_NOTE, dump, finish_info, machine_info, machine_line, median

import mspca_dask
from mspca_dask._engine.plan import choose_solver
from mspca_dask._passes import orient
from mspca_dask.testing import paper_setting

B_KNOCKOFFS = 5
#: The plain-NumPy exact path is timed up to this dimension (6 dense eighs beyond it take
#: minutes here and the package uses the randomized solver there anyway).
NUMPY_MAX_DIM = 4000
PAPER_COMPONENTS = {"1 PC": 1.42e1, "9 PCs": 1.92e1}  # ms, paper's MS-PCA, d = 900, n = 1000
PAPER_SCALING = {1000: 15.9, 2000: 49.2, 3000: 102, 4000: 216, 5000: 237, 10000: 832}  # ms


def numpy_exact(X: np.ndarray, K: int, rng: np.random.Generator) -> np.ndarray:
    """The exact path's work in plain NumPy: Gram, top-K eigh, B knockoff eighs, scores."""
    n, d = X.shape
    dual = n < d
    G = (X @ X.T if dual else X.T @ X) / n
    p = G.shape[0]

    def top(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return sla.eigh(S, subset_by_index=[p - K, p - 1])

    w, V = top(G)
    xbar = X.mean(axis=0)
    for _ in range(B_KNOCKOFFS):
        m = rng.standard_normal(d)
        m *= np.sqrt(2 * w[-1]) / np.linalg.norm(m)
        if dual:  # knockoff in sample space: γ = 1, X' = X + 1 mᵀ
            Xm = X @ m
            ones = np.ones(n)
            S = G + (np.outer(Xm, ones) + np.outer(ones, Xm) + (m @ m) * np.outer(ones, ones)) / n
        else:
            S = G + np.outer(m, xbar) + np.outer(xbar, m) + np.outer(m, m)
        top(S)
    return (X.T @ V) if dual else (X @ V)


def timed(fn: Any, repeats: int, warmup: bool = True) -> dict[str, Any]:
    """Median wall time of ``repeats`` calls, after one warm-up call (optional)."""
    first = fn() if warmup else None
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t0)
        first = first if first is not None else res
    out: dict[str, Any] = {"seconds": median(times), "repeats": times}
    if hasattr(first, "n_passes"):
        out["n_passes"], out["solver"] = int(first.n_passes), str(first.solver)
    return out


def fit_fn(X: np.ndarray, K: int, **kw: Any) -> Any:
    def run() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return mspca_dask.fit(X, n_components=K, random_state=0, **kw)

    return run


def paper_tables(
    sizes: list[int], repeats: int, big_repeats: int, shape: tuple[int, int] = (1000, 900)
) -> dict[str, Any]:
    rows = []
    X0 = paper_setting(0.1, n_samples=shape[0], n_features=shape[1], random_state=0).to_numpy()
    for label, K in (("1 PC", 2), ("9 PCs", 10)):
        row: dict[str, Any] = {
            "case": label,
            "n": shape[0],
            "d": shape[1],
            "K": K,
            "paper_ms": PAPER_COMPONENTS[label],
        }
        row["mspca_defaults"] = timed(fit_fn(X0, K), repeats)
        row["mspca_exact_none"] = timed(fit_fn(X0, K, solver="exact", location=None), repeats)
        row["numpy_exact"] = timed(
            lambda K=K: numpy_exact(X0, K, np.random.default_rng(0)), repeats
        )
        rows.append(row)
        print(
            f"{label}: "
            + ", ".join(
                f"{k} {row[k]['seconds'] * 1e3:.0f} ms"
                for k in ("mspca_defaults", "mspca_exact_none", "numpy_exact")
            ),
            flush=True,
        )
    scaling = []
    for d in sizes:
        X = paper_setting(0.1, n_samples=d, n_features=d, random_state=0).to_numpy()
        r = repeats if d <= 4000 else big_repeats
        row = {"n": d, "d": d, "K": 2, "repeats": r, "paper_ms": PAPER_SCALING.get(d)}
        row["mspca_defaults"] = timed(fit_fn(X, 2), r, warmup=d <= NUMPY_MAX_DIM)
        row["solver"] = row["mspca_defaults"]["solver"]
        row["n_passes"] = row["mspca_defaults"]["n_passes"]
        if d <= NUMPY_MAX_DIM:
            row["numpy_exact"] = timed(lambda X=X: numpy_exact(X, 2, np.random.default_rng(0)), r)
        row["warmup"] = d <= NUMPY_MAX_DIM
        scaling.append(row)
        print(
            f"d = n = {d}: mspca {row['mspca_defaults']['seconds']:.2f} s ({row['solver']})",
            flush=True,
        )
        del X
    return {"components": rows, "scaling": scaling}


def grid(ns: list[int], ds: list[int], K: int, repeats: int) -> list[dict[str, Any]]:
    from mspca_dask.testing import make_spiked_mixture

    out = []
    for n in ns:
        for d in ds:
            c = d / n
            X = make_spiked_mixture(
                n,
                d,
                covariance_spikes=(3 * max(1, np.sqrt(c)),),
                mean_shift_weights=(0.1,),
                mean_shift_strengths=(5 * max(1, np.sqrt(c)),),
                random_state=0,
            ).to_numpy()
            row: dict[str, Any] = {"n": n, "d": d, "m": max(n, d), "p": min(n, d), "K": K}
            for solver in ("exact", "randomized"):
                if solver == "exact" and min(n, d) > 8192:
                    continue
                row[solver] = timed(fit_fn(X, K, solver=solver, location=None), repeats)
            data = orient(da.from_array(X))
            row["auto_choice"] = choose_solver("auto", data.m, data.p, K, B_KNOCKOFFS, 10)
            out.append(row)
            print(
                f"n={n} d={d}: exact {row['exact']['seconds']:.2f} s, randomized "
                f"{row['randomized']['seconds']:.2f} s ({row['randomized']['n_passes']} "
                f"passes), auto -> {row['auto_choice']}",
                flush=True,
            )
            del X
    return out


def fit_cost_model(rows: list[dict[str, Any]], K: int) -> dict[str, Any]:
    from scipy.optimize import nnls

    ell = K + 10 + B_KNOCKOFFS + 3
    P = float(np.median([r["randomized"]["n_passes"] for r in rows]))
    ex = [r for r in rows if "exact" in r]
    Ae = np.array([[r["m"] * r["p"] ** 2, (B_KNOCKOFFS + 1) * r["p"] ** 3, 1.0] for r in ex])
    te = np.array([r["exact"]["seconds"] for r in ex])
    Ar = np.array(
        [
            [r["randomized"]["n_passes"] * r["m"] * r["p"] * ell, r["randomized"]["n_passes"], 1.0]
            for r in rows
        ]
    )
    tr = np.array([r["randomized"]["seconds"] for r in rows])
    # weight by 1/t so that small and large problems count alike (relative error)
    ce, _ = nnls(Ae / te[:, None], np.ones(len(te)))
    cr, _ = nnls(Ar / tr[:, None], np.ones(len(tr)))
    a_gram, a_eigh, c_exact = (float(v) for v in ce)
    a_krylov, c_pass, c_rand = (float(v) for v in cr)

    def t_exact(m: float, p: float) -> float:
        return a_gram * m * p**2 + a_eigh * (B_KNOCKOFFS + 1) * p**3 + c_exact

    def t_rand(m: float, p: float) -> float:
        return a_krylov * P * m * p * ell + c_pass * P + c_rand

    # Large m: exact wins while a_gram p² < a_krylov P p ℓ, i.e. p < p*.
    p_star = a_krylov * P * ell / a_gram if a_gram > 0 else float("inf")
    crossover = []
    for p in (100, 200, 500, 1000, 2000, 4000, 8192):
        denom = a_krylov * P * p * ell - a_gram * p**2
        num = a_eigh * (B_KNOCKOFFS + 1) * p**3 + c_exact - c_pass * P - c_rand
        m_min = max(float(p), num / denom) if denom > 0 else float("inf")
        crossover.append({"p": p, "exact_wins_from_m": m_min})
    rel = [abs(t_exact(r["m"], r["p"]) / r["exact"]["seconds"] - 1) for r in ex]
    rel_r = [abs(t_rand(r["m"], r["p"]) / r["randomized"]["seconds"] - 1) for r in rows]
    agree = [
        (t_exact(r["m"], r["p"]) <= t_rand(r["m"], r["p"]))
        == (r["exact"]["seconds"] <= r["randomized"]["seconds"])
        for r in ex
    ]

    def slowdown(pick_exact: bool, r: dict[str, Any]) -> float:
        best = min(r["exact"]["seconds"], r["randomized"]["seconds"])
        return r["exact" if pick_exact else "randomized"]["seconds"] / best

    model_slow = [slowdown(t_exact(r["m"], r["p"]) <= t_rand(r["m"], r["p"]), r) for r in ex]
    auto_slow = [slowdown(r["auto_choice"] == "exact", r) for r in ex]
    auto_right = [
        (r["auto_choice"] == "exact") == (r["exact"]["seconds"] <= r["randomized"]["seconds"])
        for r in ex
    ]
    return {
        "ell": ell,
        "passes_median": P,
        "a_gram_s_per_madd": a_gram,
        "a_eigh_s_per_p3": a_eigh,
        "c_exact_s": c_exact,
        "a_krylov_s_per_madd": a_krylov,
        "c_pass_s": c_pass,
        "c_rand_s": c_rand,
        "p_star": p_star,
        "crossover": crossover,
        "median_rel_error_exact": median(rel),
        "median_rel_error_randomized": median(rel_r),
        "model_picks_faster": f"{sum(agree)}/{len(agree)}",
        "current_auto_picks_faster": f"{sum(auto_right)}/{len(auto_right)}",
        "model_choice_slowdown_max": max(model_slow),
        "current_auto_slowdown_max": max(auto_slow),
    }


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if "exact" not in r:
            continue
        ratio = r["exact"]["seconds"] / r["randomized"]["seconds"]
        ax.scatter(r["m"], r["p"], c="tab:blue" if ratio <= 1 else "tab:red", s=60)
        ax.annotate(
            f"{ratio:.2f}", (r["m"], r["p"]), fontsize=8, xytext=(4, 3), textcoords="offset points"
        )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="m = max(n, d)",
        ylabel="p = min(n, d)",
        title="t(exact) / t(randomized): blue = exact faster, red = randomized faster",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--big-repeats", type=int, default=1, help="repeats for d = n >= 5000")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--render", action="store_true", help="only rewrite runtime.md/png from runtime.json"
    )
    ap.add_argument(
        "--grid-only",
        action="store_true",
        help="rerun only the solver grid and cost model; keep the paper tables of the last run",
    )
    args = ap.parse_args()
    sizes = [1000, 2000, 3000, 4000, 5000, 10000]
    ns, ds = [2000, 8000, 32_000], [100, 400, 1600]
    shape = (1000, 900)
    if args.quick:
        args.repeats, sizes, ns, ds, shape = 1, [200], [400, 2000], [40, 120], (300, 270)
    K = 10
    if args.render:
        stored = json.loads((args.out / "runtime.json").read_text())
        args.repeats = stored["meta"].get("repeats", args.repeats)
        write(
            args,
            stored["meta"],
            stored["paper"],
            stored["grid"],
            stored["cost_model"],
            shape,
            K,
            measured=False,
        )
        return
    meta = {
        **machine_info(),
        "quick": args.quick,
        "K_grid": K,
        "knockoffs": B_KNOCKOFFS,
        "repeats": args.repeats,
    }
    # The grid first (the cost model), written out before the slower paper tables.
    rows = grid(ns, ds, K, args.repeats)
    model = fit_cost_model(rows, K)
    if args.grid_only:
        previous = json.loads((args.out / "runtime.json").read_text())
        meta["paper_tables_from"] = {
            k: previous["meta"].get(k) for k in ("date", "load_average_start", "load_average_end")
        }
        write(args, meta, previous["paper"], rows, model, shape, K)
        return
    write(args, meta, {"components": [], "scaling": []}, rows, model, shape, K)
    paper = paper_tables(sizes, args.repeats, args.big_repeats if not args.quick else 1, shape)
    write(args, meta, paper, rows, model, shape, K)


def write(
    args: argparse.Namespace,
    meta: dict[str, Any],
    paper: dict[str, Any],
    rows: list[dict[str, Any]],
    model: dict[str, Any],
    shape: tuple[int, int],
    K: int,
    measured: bool = True,
) -> None:
    if measured:  # not when only re-rendering stored results
        finish_info(meta)
    args.out.mkdir(parents=True, exist_ok=True)
    plot(rows, args.out / "runtime.png")
    payload = {"meta": meta, "paper": paper, "grid": rows, "cost_model": model}

    def ms(x: dict[str, Any]) -> str:
        return f"{x['seconds'] * 1e3:.0f}"

    md = [
        "# Runtime of the in-memory path, and the solver cost model",
        "",
        f"Generated by `python benchmarks/runtime.py{' --quick' if args.quick else ''}`. "
        f"Machine: {machine_line(meta)}",
        "",
        SHARED_NOTE,
        "",
        *(
            [
                "The paper tables below come from an earlier run of the script "
                f"({meta['paper_tables_from']['date']}, load average "
                f"{meta['paper_tables_from']['load_average_start']} at its start); this run "
                "(`--grid-only`) remeasured the solver grid and the cost model.",
                "",
            ]
            if "paper_tables_from" in meta
            else []
        ),
        "NumPy input (the in-memory path), threaded scheduler, one warm-up run then the "
        f"median of {args.repeats} runs (d = n ≥ 5000: {args.big_repeats} run, no warm-up). "
        "The paper timed "
        "its MS-PCA with `%timeit` on 256 cores.",
        "",
        f"## Paper, runtime for the leading PCs (d = {shape[1]}, n = {shape[0]}), ms",
        "",
        "| case | n_components | mspca defaults | mspca exact, location=None | same work in "
        "NumPy | overhead vs NumPy | paper's MS-PCA |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in paper["components"]:
        over = r["mspca_exact_none"]["seconds"] - r["numpy_exact"]["seconds"]
        md.append(
            f"| {r['case']} | {r['K']} | {ms(r['mspca_defaults'])} | "
            f"{ms(r['mspca_exact_none'])} | {ms(r['numpy_exact'])} | {over * 1e3:+.0f} | "
            f"{r['paper_ms']} |"
        )
    md += [
        "",
        "## Paper, runtime scaling with dimension (d = n, largest PC, n_components = 2), ms",
        "",
        "| d = n | repeats | solver (auto) | passes | mspca defaults | exact path in NumPy | "
        "paper's MS-PCA |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in paper["scaling"]:
        md.append(
            f"| {r['d']} | {r['repeats']} | {r['solver']} | {r['n_passes']} | "
            f"{ms(r['mspca_defaults'])} | "
            f"{ms(r['numpy_exact']) if 'numpy_exact' in r else '—'} | {r['paper_ms']} |"
        )
    md += [
        "",
        f"## Exact vs randomized solver (location=None, K = {K}), seconds",
        "",
        "| n | d | exact | randomized | randomized passes | faster | auto picks |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        e, q = r.get("exact"), r["randomized"]
        faster = "exact" if e and e["seconds"] <= q["seconds"] else "randomized"
        md.append(
            f"| {r['n']} | {r['d']} | {e['seconds']:.2f} | {q['seconds']:.2f} | "
            f"{q['n_passes']} | {faster} | {r['auto_choice']} |"
        )
    m = model
    md += [
        "",
        "## Fitted cost model",
        "",
        "```",
        f"t_exact = {m['a_gram_s_per_madd']:.3e} s · m p²  +  {m['a_eigh_s_per_p3']:.3e} s · "
        f"(B+1) p³  +  {m['c_exact_s']:.3f} s",
        f"t_rand  = {m['a_krylov_s_per_madd']:.3e} s · P m p ℓ  +  {m['c_pass_s']:.3f} s · P  +  "
        f"{m['c_rand_s']:.3f} s",
        f"(B = {B_KNOCKOFFS}, ℓ = {m['ell']}, P = {m['passes_median']:g} passes, the median "
        "observed)",
        "```",
        "",
        f"Median relative error of the fit: exact {m['median_rel_error_exact']:.0%}, "
        f"randomized {m['median_rel_error_randomized']:.0%}. The fitted model picks the "
        f"faster solver on {m['model_picks_faster']} grid points; the rule in "
        f"`_engine.plan.choose_solver` (its constants as at this run) on "
        f"{m['current_auto_picks_faster']}. The slower pick, where there is one, takes at most "
        f"{m.get('model_choice_slowdown_max', float('nan')):.2f}× (fitted model) and "
        f"{m.get('current_auto_slowdown_max', float('nan')):.2f}× (`api`) the faster solver's "
        "time.",
        "",
        f"Crossover: for large m the exact solver is faster while p < p* = "
        f"{m['p_star']:.0f} (a_krylov · P · ℓ / a_gram). Smallest m at which the exact solver "
        "wins, per p:",
        "",
        "| p | exact wins from m = |",
        "|---|---|",
    ]
    md += [f"| {c['p']} | {c['exact_wins_from_m']:.3g} |" for c in m["crossover"]]
    md += ["", "![exact vs randomized](runtime.png)"]
    dump("runtime", args.out, payload, md)


if __name__ == "__main__":
    main()
