"""The parameter registry: one default, range and message per tuning parameter."""

from __future__ import annotations

import argparse
import inspect

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mspca_dask import MeanShiftPCA, fit
from mspca_dask._params import (
    PARAMETERS,
    FitParams,
    add_arguments,
    check_location,
    from_mapping,
)
from mspca_dask.errors import ParameterError


def test_fit_signature_defaults_are_the_registry_defaults():
    sig = inspect.signature(fit).parameters
    for name, p in PARAMETERS.items():
        assert sig[name].default == p.default, name


def test_estimator_defaults_and_constraints_are_the_registry_ones():
    sig = inspect.signature(MeanShiftPCA).parameters
    for name in MeanShiftPCA._parameter_constraints:
        if name in PARAMETERS:
            assert sig[name].default == PARAMETERS[name].default, name


def test_from_kwargs__message_names_parameter_and_range():
    with pytest.raises(ParameterError, match=r"alpha must be a number in \(0, 0.5\) \(not 0\)"):
        FitParams.from_kwargs(alpha=0)
    with pytest.raises(ParameterError, match=r"n_knockoffs must be an integer >= 1 \(not 2.5\)"):
        FitParams.from_kwargs(n_knockoffs=2.5)
    with pytest.raises(ParameterError, match=r"solver must be one of"):
        FitParams.from_kwargs(solver="dense")


def test_from_kwargs__refuses_booleans_for_numbers_and_unknown_names():
    with pytest.raises(ParameterError, match="n_components must be an integer"):
        FitParams.from_kwargs(n_components=True)
    with pytest.raises(ParameterError, match="did you mean 'n_knockoffs'"):
        FitParams.from_kwargs(n_knockofs=3)


def test_from_kwargs__normalises_numpy_integers():
    params = FitParams.from_kwargs(n_components=np.int64(4), random_state=np.int32(7))
    assert type(params.n_components) is int and type(params.random_state) is int


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_registry_float_check_agrees_with_sklearn_interval(value):
    from mspca_dask._params import sklearn_constraints

    (interval,) = sklearn_constraints(["knockoff_weight"])["knockoff_weight"]
    try:
        PARAMETERS["knockoff_weight"].check(value)
        ours = True
    except ParameterError:
        ours = False
    assert ours == (bool(np.isfinite(value)) and value in interval)


def test_cli_options__parse_with_the_same_rule_as_fit():
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(parser)
    args = parser.parse_args(["-k", "4", "--knockoff-weight", "0.5", "--seed", "3"])
    assert (args.n_components, args.knockoff_weight, args.random_state) == (4, 0.5, 3)
    assert args.n_knockoffs == PARAMETERS["n_knockoffs"].default
    with pytest.raises(argparse.ArgumentError, match=r"must be a number in \(0, 1\]"):
        parser.parse_args(["--knockoff-weight", "1.5"])


def test_from_mapping__config_keys_and_messages():
    params = from_mapping({"n_components": 6, "seed": 2})
    assert (params.n_components, params.random_state) == (6, 2)
    with pytest.raises(ParameterError, match=r"\[pca\] n_knockoffs must be an integer >= 1"):
        from_mapping({"n_knockoffs": 0})
    with pytest.raises(ParameterError, match=r"unknown key 'knockoff' in \[pca\]"):
        from_mapping({"knockoff": 2})


def test_check_location__modes_and_errors():
    assert check_location("auto", 3) == ("auto", None)
    assert check_location(None, 3) == ("none", None)
    mode, vec = check_location([1, 2, 3], 3)
    assert mode == "given" and vec.dtype == float
    with pytest.raises(ParameterError, match=r"location must have shape \(3,\)"):
        check_location([1, 2], 3)
    with pytest.raises(ParameterError, match="NaN or infinite"):
        check_location([1, np.nan, 3], 3)
