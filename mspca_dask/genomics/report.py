"""Figures and the self-contained HTML report of a job."""

from __future__ import annotations

import base64
import functools
import html
import io as _stdio
import json
import string
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .analysis import Analysis
from .dataset import AXES_NOTE, CENTRING_NOTE, _centring_this_run
from .ld import LD_WARN_ENRICHMENT, LD_WARN_SHARE

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


_PALETTE = (
    "tab:blue",
    "tab:red",
    "tab:green",
    "tab:orange",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
    "tab:gray",
)


#: Points drawn as line markers, not ``ax.scatter``: Agg stamps one rasterised marker per
#: point instead of filling a path each.  On the 5,000-sample benchmark cohort the three
#: score and QC figures drew in 1.4 s instead of 1.7 s, most of it the QC figure's panel of
#: 52,846 variant frequencies (0.64 to 0.46 s).
_POINTS: dict[str, Any] = {"linestyle": "none", "marker": "o", "markeredgewidth": 0}


def _one_per_cell(x: np.ndarray, y: np.ndarray, cells: tuple[int, int]) -> np.ndarray:
    """Indices of one point per cell of a ``cells`` grid over the points' range.

    A dense panel draws the same with one marker per cell when a cell is about a marker's
    radius: Agg stamps every marker, also those hidden under others.
    """
    ok = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    index = np.zeros(ok.size, dtype=np.int64)
    for v, n in ((x[ok], cells[0]), (y[ok], cells[1])):
        lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 0.0)
        index = index * n + np.floor((v - lo) / ((hi - lo) or 1.0) * (n - 1)).astype(np.int64)
    return ok[np.sort(np.unique(index, return_index=True)[1])]


def _scatter(ax: Axes, x: np.ndarray, y: np.ndarray, labels: np.ndarray | None) -> None:
    """Points of ``(x, y)``, one colour per label (largest group first)."""
    if labels is None:
        ax.plot(x, y, markersize=3.2, color="tab:blue", alpha=0.7, **_POINTS)
        return
    groups = sorted(set(labels.tolist()), key=lambda g: -int((labels == g).sum()))
    for i, g in enumerate(groups):
        m = labels == g
        ax.plot(
            x[m],
            y[m],
            markersize=3.5,
            alpha=0.75,
            color=_PALETTE[i % len(_PALETTE)],
            label=f"{g} ({int(m.sum())})",
            **_POINTS,
        )
    ax.legend(fontsize="small", markerscale=1.5, loc="best")


def _figure(**kw: Any) -> Figure:
    from matplotlib.figure import Figure

    return Figure(layout="constrained", **kw)


def _pc_label(ds: xr.Dataset, k: int) -> str:
    """``"PC1 (covariance, λ = 12.3, 4.1%)"`` for position ``k`` (PCs are numbered from 1)."""
    share = ""
    if "variance_explained" in ds:
        share = f", {100.0 * float(ds['variance_explained'].values[k]):.1f}%"
    return (
        f"PC{k + 1} ({ds['verdict'].values[k]}, λ = {float(ds['eigenvalue'].values[k]):.4g}{share})"
    )


def make_figures(ds: xr.Dataset, an: Analysis | None = None) -> dict[str, Figure]:
    """The report's figures: spectrum, sample scores (PC1-PC2, PC3-PC4), variance explained,
    loadings along the genome with the LD diagnostic, QC histograms."""
    figs: dict[str, Figure] = {}
    inc = np.asarray(ds["sample_included"].values, bool)
    scores = np.asarray(ds["sample_score"].values)[inc]
    labels = None
    if "sample_label" in ds:
        labels = np.asarray(ds["sample_label"].values).astype(str)[inc]
    label_name = ""
    if labels is not None:
        label_name = str(json.loads(ds.attrs["params"]).get("color_by") or "metadata")
    verdict = np.asarray(ds["verdict"].values).astype(str)
    shift = np.flatnonzero(verdict == "mean shift")

    # Spectrum (and the all-sample-centred comparison when computed).
    if an is not None:
        panels = [
            (
                "reference centring"
                if ds.attrs["reference_mode"] != "auto"
                else "robust (auto) centring",
                an.result,
            )
        ]
        if an.comparison is not None:
            panels.append(("all-sample centring (for comparison)", an.comparison["result"]))
        fig = _figure(figsize=(6.4 * len(panels), 4.2))
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        for ax, (title, r) in zip(axes, panels, strict=True):
            r.plot(ax=ax)
            ax.set_title(f"{title}: {r.n_stable} stable of {r.n_components}")
        figs["spectrum"] = fig

    def score_fig(pairs: list[tuple[int, int | None]], title: str) -> Figure:
        fig = _figure(figsize=(5.2 * len(pairs), 4.4))
        axes = fig.subplots(1, len(pairs), squeeze=False)[0]
        for ax, (a, b) in zip(axes, pairs, strict=True):
            if b is None:
                _scatter(ax, np.arange(len(scores)), scores[:, a], labels)
                ax.set_xlabel("sample (index)")
                ax.set_ylabel(_pc_label(ds, a))
            else:
                _scatter(ax, scores[:, a], scores[:, b], labels)
                ax.set_xlabel(_pc_label(ds, a))
                ax.set_ylabel(_pc_label(ds, b))
        fig.suptitle(title)
        return fig

    # PC1-PC2 and PC3-PC4 of every analysed sample, whatever their verdicts: population axes
    # are often 'mean shift' PCs and must not be left out.
    K = scores.shape[1]
    pairs: list[tuple[int, int | None]] = [(a, a + 1) for a in (0, 2) if a + 1 < K]
    if not pairs:
        pairs = [(0, None)]
    title = f"Sample scores, coloured by {label_name}" if label_name else "Sample scores"
    figs["scores"] = score_fig(pairs, title)
    # A mean-shift PC beyond PC4 gets its own panel (against PC1).
    late = [int(k) for k in shift if k >= 4][:2]
    if late:
        figs["scores_mean_shift"] = score_fig(
            [(0, k) for k in late], "Mean-shift PCs beyond PC4 (made by a shifted group)"
        )

    figs["variance"] = _variance_figure(ds)
    if "ld_top_share" in ds:
        figs["loadings"] = _loadings_figure(ds)

    # QC histograms.
    fig = _figure(figsize=(12.8, 3.6))
    a1, a2, a3, a4 = fig.subplots(1, 4)
    p = np.asarray(ds["variant_allele_frequency"].values)
    maf = np.minimum(p, 1 - p)
    params = json.loads(ds.attrs["params"])
    a1.hist(maf[np.isfinite(maf)], bins=50, color="0.5")
    a1.axvline(params["min_maf"], color="tab:red", linestyle="--", label="min_maf")
    a1.set_xlabel("minor allele frequency (all variants)")
    a1.legend(fontsize="small")
    vm = np.asarray(ds["variant_missing_rate"].values)
    a2.hist(
        vm,
        bins=50,
        range=(0.0, max(1.5 * params["max_variant_missing"], vm.max(), 0.01)),
        color="0.5",
    )
    a2.axvline(params["max_variant_missing"], color="tab:red", linestyle="--")
    a2.set_xlabel("variant missing rate")
    cr = np.asarray(ds["sample_call_rate"].values)
    lo = min(params["min_sample_call_rate"] - 0.05, float(cr.min()))
    a3.hist(cr, bins=30, range=(max(lo, 0.0), 1.0), color="0.5")
    a3.axvline(params["min_sample_call_rate"], color="tab:red", linestyle="--")
    a3.set_xlabel("sample call rate")
    vi = np.asarray(ds["variant_included"].values, bool)
    pr = np.asarray(ds["variant_reference_frequency"].values)
    shown = np.flatnonzero(vi)
    shown = shown[_one_per_cell(p[shown], pr[shown], (300, 300))]  # ~300 pixels a side
    a4.plot(p[shown], pr[shown], markersize=1.4, alpha=0.3, color="tab:blue", **_POINTS)
    a4.plot([0, 1], [0, 1], color="black", linewidth=0.8)
    a4.set_xlabel("all-sample frequency")
    a4.set_ylabel("centring (reference) frequency")
    for ax in (a1, a2, a3):
        ax.set_ylabel("count")
    fig.suptitle("QC")
    figs["qc"] = fig
    return figs


_VERDICT_COLOURS = {
    "covariance": "tab:blue",
    "mixed": "tab:purple",
    "mean shift": "tab:red",
    "undetermined": "tab:orange",
    "bulk": "0.6",
}


def _variance_figure(ds: xr.Dataset) -> Figure:
    """Each PC's share of the total variance, coloured by verdict."""
    K = ds.sizes["component"]
    share = (
        100.0 * np.asarray(ds["variance_explained"].values, float)
        if "variance_explained" in ds
        else np.full(K, np.nan)
    )
    verdict = np.asarray(ds["verdict"].values).astype(str)
    fig = _figure(figsize=(max(4.8, 0.5 * K + 2.5), 3.4))
    ax = fig.subplots()
    x = np.arange(1, K + 1)
    for v, colour in _VERDICT_COLOURS.items():
        m = verdict == v
        if m.any():
            ax.bar(x[m], share[m], color=colour, label=v)
    ax.set_xticks(x, [f"PC{k}" for k in x], rotation=90 if K > 12 else 0)
    ax.set_ylabel("variance explained (%)")
    ax.legend(fontsize="small")
    ax.set_title("Variance explained per PC")
    return fig


def _genome_axis(contig: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Positions laid end to end over the contigs (in order of appearance), and the ticks."""
    x = np.zeros(position.size)
    ticks = []
    offset = 0.0
    for c in dict.fromkeys(contig.tolist()):
        m = contig == c
        x[m] = offset + position[m]
        top = float(position[m].max())
        ticks.append((offset + top / 2, c, offset))
        offset += top * 1.02 + 1
    return x, ticks


def _loadings_figure(ds: xr.Dataset) -> Figure:
    """|loading| of every analysed variant along the genome, one panel per PC, the densest
    window of its top loadings shaded (red when the PC is flagged as one region's)."""
    from .dataset import ld_region

    inc = np.asarray(ds["variant_included"].values, bool)
    contig = np.asarray(ds["variant_contig"].values).astype(str)[inc]
    position = np.asarray(ds["variant_position"].values, float)[inc]
    L = np.abs(np.asarray(ds["variant_loading"].values, float)[inc])
    x, ticks = _genome_axis(contig, position)
    offsets = {c: off for _, c, off in ticks}
    colour = np.zeros(x.size, int)
    for i, (_, c, _) in enumerate(ticks):
        colour[contig == c] = i % 2
    K = ds.sizes["component"]
    fig = _figure(figsize=(12.8, 1.7 * K + 0.6))
    axes = fig.subplots(K, 1, sharex=True, squeeze=False)[:, 0]
    for k, ax in enumerate(axes):
        for j, tone in enumerate(("tab:blue", "tab:gray")):
            m = np.flatnonzero(colour == j)
            # a panel is about 1,400 × 190 pixels at 110 dpi, a marker's radius 1.2
            m = m[_one_per_cell(x[m], L[m, k], (1200, 160))]
            ax.plot(x[m], L[m, k], markersize=1.6, alpha=0.6, color=tone, **_POINTS)
        flagged = bool(ds["ld_region_warning"].values[k])
        c = str(ds["ld_window_contig"].values[k])
        lo = offsets.get(c, 0.0) + float(ds["ld_window_start"].values[k])
        hi = offsets.get(c, 0.0) + float(ds["ld_window_end"].values[k])
        ax.axvspan(lo, max(hi, lo + 1), color="tab:red" if flagged else "tab:orange", alpha=0.3)
        share = 100.0 * float(ds["ld_top_share"].values[k])
        ax.set_title(
            f"PC{k + 1}: {share:.0f}% of its top {ds.attrs['ld_top_variants']} |loadings| in "
            f"{ld_region(ds, k)}" + (" - driven by one region?" if flagged else ""),
            fontsize="small",
            loc="left",
            color="tab:red" if flagged else "black",
        )
        ax.set_ylabel("|loading|", fontsize="small")
    axes[-1].set_xticks([t for t, _, _ in ticks], [c for _, c, _ in ticks])
    axes[-1].set_xlabel("contig (positions laid end to end)")
    return fig


def _group_table(ds: xr.Dataset) -> list[tuple[str, list[tuple[str, int, float, float]]]]:
    """Per candidate eigenpair: mean and sd of scores per metadata group."""
    if "sample_label" not in ds:
        return []
    inc = np.asarray(ds["sample_included"].values, bool)
    labels = np.asarray(ds["sample_label"].values).astype(str)[inc]
    scores = np.asarray(ds["sample_score"].values)[inc]
    out = []
    for k in np.flatnonzero(np.asarray(ds["candidate"].values)):
        rows = []
        for g in sorted(set(labels.tolist())):
            v = scores[labels == g, k]
            rows.append((g, int(v.size), float(v.mean()), float(v.std())))
        out.append((_pc_label(ds, int(k)), rows))
    return out


def write_report(ds: xr.Dataset, an: Analysis | None, directory: Path) -> list[Path]:
    """Write ``figures/*.png`` and a self-contained ``report.html`` (PNGs inlined)."""
    figdir = directory / "figures"
    figdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    pngs: dict[str, bytes] = {}
    for name, fig in make_figures(ds, an).items():
        buf = _stdio.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        pngs[name] = buf.getvalue()
        path = figdir / f"{name}.png"
        path.write_bytes(pngs[name])
        written.append(path)
    page = directory / "report.html"
    page.write_text(_report_html(ds, pngs), encoding="utf-8")
    written.append(page)
    return written


#: The HTML page of the report, package data of :mod:`mspca_dask.genomics`.
TEMPLATE = "templates/report.html"

_CAPTIONS = {
    "spectrum": "Eigenvalues (filled), where the knockoffs moved them (hollow), and the "
    "Marchenko-Pastur bulk edge (dashed). Mean-shift spikes move; covariance spikes stay.",
    "scores": "PC1 against PC2 and PC3 against PC4 for every analysed sample, coloured by the "
    "metadata column when one is given; axis labels give the verdict, eigenvalue and share of "
    "the variance.",
    "scores_mean_shift": "Mean-shift PCs beyond PC4 against PC1: directions made by a shifted "
    "group of samples (e.g. an admixed or distinct population).",
    "variance": "Each PC's share of the total variance (the sum of all eigenvalues), coloured "
    "by verdict.",
    "loadings": "|Loading| of every analysed variant along the genome, per PC. Shaded: the "
    "densest window holding the PC's largest |loadings| (red: flagged as driven by one "
    "region).",
    "qc": "Minor allele frequency, variant missingness, sample call rate (dashed: thresholds), "
    "and centring vs all-sample frequency of the analysed variants.",
}
_EIG_HEADER = (
    "PC",
    "eigenvalue",
    "variance explained",
    "knockoff (median)",
    "displacement",
    "overlap",
    "verdict",
    "reason",
)


def _report_html(ds: xr.Dataset, pngs: Mapping[str, bytes]) -> str:
    esc = html.escape
    a = ds.attrs

    def img(name: str, caption: str) -> str:
        if name not in pngs:
            return ""
        b64 = base64.b64encode(pngs[name]).decode("ascii")
        return (
            f'<figure><img alt="{esc(name)}" src="data:image/png;base64,{b64}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )

    def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
        head = "".join(f"<th>{esc(str(h))}</th>" for h in header)
        body = "".join(
            "<tr>" + "".join(f"<td>{esc(str(c))}</td>" for c in r) + "</tr>" for r in rows
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    kn = np.asarray(ds["knockoff_eigenvalue"].values)
    K = ds.sizes["component"]
    share = (
        np.asarray(ds["variance_explained"].values, float)
        if "variance_explained" in ds
        else np.full(K, np.nan)
    )
    eig_rows = [
        (
            f"PC{k + 1}",
            f"{float(ds['eigenvalue'].values[k]):.6g}",
            f"{100.0 * share[k]:.2f}%",
            f"{float(np.median(kn[:, k])):.6g}",
            f"{float(ds['displacement'].values[k]):.4g}",
            f"{float(ds['eigenvector_overlap'].values[k]):.3f}",
            str(ds["verdict"].values[k]),
            str(ds["reason"].values[k]),
        )
        for k in range(K)
    ]
    verdict = np.asarray(ds["verdict"].values).astype(str)
    n_shift = int((verdict == "mean shift").sum())
    n_stable = int(np.isin(verdict, ("covariance", "mixed")).sum())
    qc_rows = [*json.loads(a["qc_counts"]).items(), ("missing calls imputed", a["n_imputed_calls"])]
    groups = "".join(
        f"<h3>{esc(title)}</h3>"
        + table(
            ("group", "samples", "mean score", "sd"),
            [(g, n, f"{m:.4g}", f"{s:.4g}") for g, n, m, s in rows],
        )
        for title, rows in _group_table(ds)
    )
    comparison = ""
    if "centring_comparison" in a:
        c = json.loads(a["centring_comparison"])
        comparison = (
            "<h2>What all-sample centring would have said</h2><p>"
            + esc(c["description"])
            + ". After all-sample centring the knockoff no longer "
            "overlaps the shifted population, so its spike barely moves (compare the "
            "displacements with the table above):</p>"
            + table(
                ("PC", "eigenvalue", "knockoff (median)", "displacement", "verdict"),
                [
                    (f"PC{k}", f"{ev:.6g}", f"{kv:.6g}", f"{dv:.4g}", v)
                    for k, (ev, kv, dv, v) in enumerate(
                        zip(
                            c["eigenvalue"],
                            c["knockoff_eigenvalue"],
                            c["displacement"],
                            c["verdict"],
                            strict=True,
                        ),
                        start=1,
                    )
                ],
            )
        )
    ld_rows, ld_warnings = _ld_rows(ds)
    ld_table = (
        table(("PC", "top |loadings| in window", "window", "all variants there", "flag"), ld_rows)
        if ld_rows
        else "<p>This result was written before the LD diagnostic was stored.</p>"
    )
    ld_notes = "".join(f'<div class="warn">{esc(w)}</div>' for w in ld_warnings)
    fit_warning = ""
    if a.get("model_fit_warning"):
        fit_warning = "".join(
            f'<div class="warn"><strong>Model fit.</strong> {esc(w)}</div>'
            for w in str(a["model_fit_warning"]).splitlines()
        )
    prov = [
        ("job", a["job_name"]),
        ("created (UTC)", a["created_utc"]),
        ("input store", a["input_store"]),
        ("input variable", a["input_variable"]),
        ("input fingerprint", a["input_fingerprint"]),
        ("job fingerprint", a["job_fingerprint"]),
        ("reference", f"{a['reference_mode']}: {a['reference_description']}"),
        ("scale from", a["scale_from"]),
        *(
            [
                (
                    "samples fitted / projected",
                    f"{a['n_samples_analysed']} fitted ({a['fit_description']}) / "
                    f"{a['n_samples_projected']} projected ({a['projection_method']} scores, "
                    "in the score plots with the fitted ones; sample_fitted says which)",
                )
            ]
            if "n_samples_projected" in a
            else []
        ),
        ("seed", a["random_state"]),
        (
            "passes over the genotypes",
            f"{a['n_passes']} ({a['n_passes_detail']})"
            if "n_passes_detail" in a
            else a["n_passes"],
        ),
        ("timings (s)", a["timings"]),
        ("versions", a["versions"]),
    ]
    return _template().substitute(
        job_name=esc(a["job_name"]),
        n_stable=n_stable,
        n_shift=n_shift,
        n_components=ds.sizes["component"],
        total_variance=f"{float(a['total_variance']):.6g}" if "total_variance" in a else "unknown",
        n_samples=a["n_samples_analysed"],
        n_variants=a["n_variants_analysed"],
        axes_note=esc(AXES_NOTE),
        centring_note=esc(CENTRING_NOTE),
        centring_this_run=esc(_centring_this_run(a)),
        spectrum_figure=img("spectrum", _CAPTIONS["spectrum"]),
        eigenpair_table=table(_EIG_HEADER, eig_rows),
        comparison=comparison,
        fit_warning=fit_warning,
        variance_figure=img("variance", _CAPTIONS["variance"]),
        scores_figure=img("scores", _CAPTIONS["scores"]),
        scores_mean_shift_figure=img("scores_mean_shift", _CAPTIONS["scores_mean_shift"]),
        loadings_figure=img("loadings", _CAPTIONS["loadings"]),
        ld_table=ld_table,
        ld_warnings=ld_notes,
        ld_top=esc(str(a.get("ld_top_variants", ""))),
        ld_window=esc(f"{int(a.get('ld_window_bp', 0)) / 1e6:g}"),
        ld_share=f"{100 * LD_WARN_SHARE:.0f}",
        ld_enrichment=f"{LD_WARN_ENRICHMENT:g}",
        groups=groups,
        qc_table=table(("quantity", "count"), qc_rows),
        qc_figure=img("qc", _CAPTIONS["qc"]),
        provenance_table=table(("", ""), prov),
        params=esc(json.dumps(json.loads(a["params"]), indent=2)),
    )


def _ld_rows(ds: xr.Dataset) -> tuple[list[tuple[str, ...]], list[str]]:
    """Rows of the LD table (PC, share, window, background, flag) and the warnings."""
    from .dataset import ld_lines, ld_region

    if "ld_top_share" not in ds:
        return [], []
    rows: list[tuple[str, ...]] = [
        (
            f"PC{k + 1}",
            f"{100 * float(ds['ld_top_share'].values[k]):.0f}%",
            ld_region(ds, k),
            f"{100 * float(ds['ld_background_share'].values[k]):.1f}%",
            "driven by one region?" if bool(ds["ld_region_warning"].values[k]) else "",
        )
        for k in range(ds.sizes["component"])
    ]
    return rows, ld_lines(ds)[1]


@functools.cache
def _template() -> string.Template:
    """The page, ``templates/report.html`` of this package (``$name`` placeholders)."""
    text = resources.files(__package__).joinpath(TEMPLATE).read_text(encoding="utf-8")
    return string.Template(text)
