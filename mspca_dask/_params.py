"""The one registry of MS-PCA's tuning parameters: defaults, ranges, messages, documentation.

Every place that takes these parameters reads them from here:

- :func:`mspca_dask.fit` validates its keywords with :meth:`FitParams.from_kwargs`;
- :class:`mspca_dask.MeanShiftPCA` builds its ``_parameter_constraints`` with
  :func:`sklearn_constraints`;
- the ``mspca fit`` command adds its options with :func:`add_arguments`;
- the genomics job reads its ``[pca]`` section with :func:`from_mapping`.

So a default, a range or a message is written once, and the four cannot disagree.  Nothing
here reads data or imports Dask.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import ParameterError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "SOLVERS",
    "Param",
    "PARAMETERS",
    "FitParams",
    "check_location",
    "check_reference_samples",
    "sklearn_constraints",
    "add_arguments",
    "from_mapping",
]

#: The eigensolvers :func:`mspca_dask.fit` knows (``"auto"`` picks one by its cost model).
SOLVERS = ("auto", "exact", "randomized")


@dataclass(frozen=True)
class Param:
    """One tuning parameter: its type, its range and how each interface spells it.

    Attributes
    ----------
    name : str
        The keyword of :func:`mspca_dask.fit`.
    kind : {"int", "float", "choice", "seed"}
        ``"seed"``: a non-negative integer or None.
    low, high : float, optional
        Bounds of the range (None: unbounded on that side).
    closed : {"both", "left", "right", "neither"}
        Which bounds belong to the range.
    choices : tuple of str
        The allowed values of a ``"choice"``.
    none_ok : bool
        Whether None is allowed (``tol``: "derive it").
    help : str
        One line for ``--help`` and the config documentation; names no default.
    flag : str, optional
        The ``mspca fit`` option (None: not on the command line).
    short : str, optional
        Its one-letter alias.
    metavar : str, optional
        The placeholder shown by ``--help``.
    config_key : str
        The key of the genomics job's ``[pca]`` section.
    """

    name: str
    kind: str
    help: str
    low: float | None = None
    high: float | None = None
    closed: str = "both"
    choices: tuple[str, ...] = ()
    none_ok: bool = False
    flag: str | None = None
    short: str | None = None
    metavar: str | None = None
    config_key: str = ""

    @property
    def default(self) -> Any:
        """The default value, as :class:`FitParams` declares it."""
        return _DEFAULTS[self.name]

    def range_text(self) -> str:
        """The allowed values in words, e.g. ``"an integer >= 1"`` or ``"in (0, 1]"``."""
        if self.kind == "choice":
            return f"one of {list(self.choices)}"
        if self.kind == "seed":
            return "a non-negative integer or None"
        noun = "an integer" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            left = "[" if self.closed in ("both", "left") else "("
            right = "]" if self.closed in ("both", "right") else ")"
            text = f"{noun} in {left}{self.low:g}, {self.high:g}{right}"
        elif self.low is not None:
            op = ">=" if self.closed in ("both", "left") else ">"
            text = f"{noun} {op} {self.low:g}"
        else:
            text = noun
        return text + (" or None" if self.none_ok else "")

    def check(self, value: Any, where: str | None = None) -> Any:
        """The value, normalised (NumPy integers to ``int``), or :class:`ParameterError`.

        Parameters
        ----------
        value : object
            The value given.
        where : str, optional
            How the message names the parameter (default: its name).
        """
        label = where or self.name
        if value is None and (self.none_ok or self.kind == "seed"):
            return None
        ok, norm = _conforms(self, value)
        if not ok:
            raise ParameterError(f"{label} must be {self.range_text()} (not {value!r})")
        return norm


def _conforms(p: Param, value: Any) -> tuple[bool, Any]:
    """Whether ``value`` is in ``p``'s range, and the value normalised."""
    import numpy as np  # here, not at the top: ``mspca --help`` builds parsers without NumPy

    if p.kind == "choice":
        return (isinstance(value, str) and value in p.choices), value
    if isinstance(value, bool):
        return False, value
    if p.kind in ("int", "seed"):
        if not isinstance(value, int | np.integer):
            return False, value
        value = int(value)
        low = 0 if p.kind == "seed" else p.low
        return (low is None or value >= low), value
    if not isinstance(value, int | float | np.integer | np.floating) or not np.isfinite(value):
        return False, value
    value = float(value)
    lo_ok = p.low is None or (value >= p.low if p.closed in ("both", "left") else value > p.low)
    hi_ok = p.high is None or (value <= p.high if p.closed in ("both", "right") else value < p.high)
    return (lo_ok and hi_ok), value


#: The registry, in the order of :func:`mspca_dask.fit`'s signature.
PARAMETERS: dict[str, Param] = {
    p.name: p
    for p in (
        Param(
            "n_components",
            "int",
            "number K of leading eigenpairs examined",
            low=1,
            flag="--components",
            short="-k",
            metavar="K",
        ),
        Param(
            "solver",
            "choice",
            "eigensolver: dense Gram matrix ('exact'), certified block Krylov ('randomized'), "
            "or the one a cost model fitted to measured timings predicts faster ('auto')",
            choices=SOLVERS,
            flag="--solver",
        ),
        Param(
            "n_knockoffs",
            "int",
            "number B of independent knockoffs; each statistic is their median",
            low=1,
            flag="--knockoffs",
            metavar="B",
        ),
        Param(
            "knockoff_weight",
            "float",
            "fraction pi' of samples that receive the knockoff shift (paper: 1)",
            low=0,
            high=1,
            closed="right",
            flag="--knockoff-weight",
            metavar="PI",
        ),
        Param(
            "knockoff_factor",
            "float",
            "knockoff strength: theta'^2 = factor * sigma^2 g^-1(lambda_1 / sigma^2) (paper: 2)",
            low=0,
            closed="neither",
            flag="--knockoff-factor",
            metavar="F",
        ),
        Param(
            "threshold_scale",
            "float",
            "C in the invariance radius eps = C sigma^2 n^(-1/2)",
            low=0,
            closed="neither",
            flag="--threshold-scale",
            metavar="C",
        ),
        Param(
            "alpha",
            "float",
            "level of the verdict's tests: the group test over the whole fit, and each pair's "
            "shift test (Bonferroni over the candidates)",
            low=0,
            high=0.5,
            closed="neither",
            flag="--alpha",
            metavar="A",
        ),
        Param(
            "edge_margin",
            "float",
            "a candidate spike must exceed the bulk edge by this many Tracy-Widom units (the "
            "within-group covariance's spikes its own edge)",
            low=0,
            flag="--edge-margin",
            metavar="M",
        ),
        Param(
            "tol",
            "float",
            "eigenvalue accuracy the randomized solver certifies (default: 0.1 sigma^2 / sqrt(n))",
            low=0,
            closed="neither",
            none_ok=True,
            flag="--tol",
            metavar="TOL",
        ),
        Param(
            "max_passes",
            "int",
            "pass budget of the randomized solver",
            low=2,
            flag="--max-passes",
            metavar="N",
        ),
        Param(
            "oversampling",
            "int",
            "extra columns of the randomized sketch",
            low=0,
            flag="--oversampling",
            metavar="P",
        ),
        Param(
            "random_state",
            "seed",
            "seed of every random draw (sketch, knockoff directions, memberships)",
            flag="--seed",
            metavar="S",
            config_key="seed",
        ),
    )
}


@dataclass(frozen=True)
class FitParams:
    """The validated tuning parameters of one fit; the class attributes are the defaults.

    Build it with :meth:`from_kwargs`, which checks every value against :data:`PARAMETERS`.

    Examples
    --------
    >>> FitParams.from_kwargs(n_components=4).n_knockoffs
    5
    >>> FitParams.from_kwargs(knockoff_weight=0)
    Traceback (most recent call last):
    ...
    mspca_dask.errors.ParameterError: knockoff_weight must be a number in (0, 1] (not 0)
    """

    n_components: int = 10
    solver: str = "auto"
    n_knockoffs: int = 5
    knockoff_weight: float = 1.0
    knockoff_factor: float = 2.0
    threshold_scale: float = 3.0
    alpha: float = 0.05
    edge_margin: float = 4.0
    tol: float | None = None
    max_passes: int = 40
    oversampling: int = 10
    random_state: int | None = 0

    @classmethod
    def from_kwargs(cls, **values: Any) -> FitParams:
        """Check each given value against its :class:`Param`; the others take defaults.

        Raises
        ------
        ParameterError
            An unknown name, or a value out of its range (the message gives the range).
        """
        unknown = sorted(set(values) - set(PARAMETERS))
        if unknown:
            raise ParameterError(
                f"unknown parameter {unknown[0]!r}{_suggest(unknown[0], PARAMETERS)}"
            )
        return cls(**{k: PARAMETERS[k].check(v) for k, v in values.items()})

    def as_dict(self) -> dict[str, Any]:
        """``{name: value}`` in the registry's order (what a result's ``params`` records)."""
        return dataclasses.asdict(self)


_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(FitParams)}
assert set(_DEFAULTS) == set(PARAMETERS), "FitParams and PARAMETERS must list the same names"


def check_location(location: Any, n_features: int) -> tuple[str, np.ndarray | None]:
    """Resolve ``location`` once: ``("auto", None)``, ``("none", None)`` or ``("given", v)``.

    Parameters
    ----------
    location : {"auto"}, None or array_like of shape (n_features,)
        What :func:`mspca_dask.fit` subtracts from every sample.
    n_features : int
        ``d``, the length a given vector must have.

    Returns
    -------
    mode : {"auto", "none", "given"}
    vector : ndarray of shape (n_features,) or None
        The given location as float64, else None.

    Raises
    ------
    ParameterError
        An unknown string, a vector of the wrong shape, or NaN/infinite entries.
    """
    import numpy as np

    if location is None:
        return "none", None
    if isinstance(location, str):
        if location == "auto":
            return "auto", None
        raise ParameterError(
            f"location must be 'auto', None or a vector of length {n_features} (not {location!r})"
        )
    vec = np.asarray(location, dtype=float)
    if vec.shape != (n_features,):
        raise ParameterError(
            f"location must have shape ({n_features},) to match the features (got {vec.shape})"
        )
    if not np.all(np.isfinite(vec)):
        raise ParameterError("location contains NaN or infinite values")
    return "given", vec


def check_reference_samples(reference: Any, n_samples: int) -> np.ndarray:
    """The ``(n_samples,)`` mask of ``reference_samples`` given for an array source.

    Parameters
    ----------
    reference : (n_samples,) bool array_like or integer indices
        Samples known to be inliers.
    n_samples : int

    Raises
    ------
    ParameterError
        Not a mask of ``n_samples`` entries nor integer indices in range, or fewer than 2
        samples on either side.
    """
    import numpy as np

    ref = np.asarray(reference)
    if ref.dtype == bool:
        if ref.shape != (n_samples,):
            raise ParameterError(
                f"reference_samples as a boolean mask must have one entry per sample, shape "
                f"({n_samples},) (got {ref.shape})"
            )
        mask = ref.copy()
    elif ref.ndim == 1 and np.issubdtype(ref.dtype, np.integer):
        if ref.size and (ref.min() < -n_samples or ref.max() >= n_samples):
            raise ParameterError(
                f"reference_samples holds sample indices outside 0 .. {n_samples - 1}"
            )
        mask = np.zeros(n_samples, dtype=bool)
        mask[ref] = True
    else:
        raise ParameterError(
            "reference_samples for an array source must be a boolean mask over the samples or "
            f"integer sample indices (got dtype {ref.dtype}, shape {ref.shape}); sample ids "
            "name samples of a genotype store only"
        )
    if min(int(mask.sum()), int((~mask).sum())) < 2:
        raise ParameterError(
            f"reference_samples selects {int(mask.sum())} of {n_samples} samples; at least 2 "
            "must be in it and 2 outside it"
        )
    return mask


def sklearn_constraints(names: Iterable[str]) -> dict[str, list[Any]]:
    """scikit-learn ``_parameter_constraints`` entries for the named parameters.

    Parameters
    ----------
    names : iterable of str
        Names in :data:`PARAMETERS` (``random_state`` becomes ``["random_state"]``, which
        also accepts a ``RandomState`` instance, as scikit-learn's estimators do).
    """
    from numbers import Integral, Real

    from sklearn.utils._param_validation import Interval, StrOptions

    out: dict[str, list[Any]] = {}
    for name in names:
        p = PARAMETERS[name]
        if p.kind == "choice":
            out[name] = [StrOptions(set(p.choices))]
        elif p.kind == "seed":
            out[name] = ["random_state"]
        else:
            kind = Integral if p.kind == "int" else Real
            closed = p.closed
            if p.high is None:  # scikit-learn spells an unbounded right end "open"
                closed = "left" if closed in ("both", "left") else "neither"
            out[name] = [Interval(kind, p.low, p.high, closed=closed)]
            if p.none_ok:
                out[name].append(None)
    return out


def _argparse_type(p: Param) -> Any:
    """argparse ``type=``: parse the text, then check it with the same rule as ``fit``."""

    def parse(text: str) -> Any:
        try:
            value: Any = int(text) if p.kind in ("int", "seed") else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {p.range_text()} (not {text!r})") from None
        try:
            return p.check(value)
        except ParameterError:
            raise argparse.ArgumentTypeError(f"must be {p.range_text()} (not {text!r})") from None

    parse.__name__ = p.kind  # argparse names the type in its messages
    return parse


def add_arguments(parser: argparse.ArgumentParser, names: Iterable[str] | None = None) -> None:
    """Add the command-line options of the named parameters (default: all with a flag).

    Each option's ``dest`` is the parameter's name, its default the registry's, and its help
    the registry's line followed by the default.
    """
    for name in PARAMETERS if names is None else names:
        p = PARAMETERS[name]
        if p.flag is None:
            continue
        flags = [p.flag] + ([p.short] if p.short else [])
        default_text = "" if p.default is None else f" (default: {p.default})"
        kwargs: dict[str, Any] = {"dest": name, "default": p.default}
        if p.kind == "choice":
            kwargs["choices"] = p.choices
        else:
            kwargs["type"] = _argparse_type(p)
            kwargs["metavar"] = p.metavar
        parser.add_argument(*flags, help=p.help + default_text, **kwargs)


def config_keys() -> dict[str, str]:
    """``{config key: parameter name}`` of a config file's ``[pca]`` section."""
    return {(p.config_key or p.name): p.name for p in PARAMETERS.values()}


def from_mapping(section: Mapping[str, Any], where: str = "[pca]") -> FitParams:
    """Validate a config file's section of tuning parameters (e.g. the genomics ``[pca]``).

    Parameters
    ----------
    section : mapping
        ``{config key: value}``; keys as :func:`config_keys` lists them (``seed`` for
        ``random_state``).
    where : str
        The section's name in messages.

    Raises
    ------
    ParameterError
        An unknown key (with the closest valid one) or a value out of range; the message
        names the section and key, e.g. ``"[pca] n_knockoffs must be an integer >= 1"``.
    """
    keys = config_keys()
    values: dict[str, Any] = {}
    for key, value in section.items():
        if key not in keys:
            raise ParameterError(f"unknown key {key!r} in {where}{_suggest(key, keys)}")
        values[keys[key]] = PARAMETERS[keys[key]].check(value, where=f"{where} {key}")
    return FitParams(**values)


def _suggest(word: str, options: Iterable[str]) -> str:
    close = difflib.get_close_matches(str(word), sorted(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(sorted(options))}"
