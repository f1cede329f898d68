"""Sphinx configuration: the API reference is built from the package's numpydoc docstrings.

Build with ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` (warnings are
errors, as in ``.ci/run``).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

project = "mspca_dask"
author = "mspca_dask contributors"
copyright = "the mspca_dask contributors"
try:
    release = version("mspca-dask")
except PackageNotFoundError:  # building from a tree that is not installed
    release = "0+unknown"
version = release

extensions = [
    "sphinx.ext.autodoc",
    "numpydoc",
    "sphinx.ext.mathjax",
]

# numpydoc renders the Parameters/Returns/Attributes sections; autodoc lists the members
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "show-inheritance": True}

exclude_patterns = ["_build"]
html_theme = "alabaster"
html_static_path: list[str] = []
