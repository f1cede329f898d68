"""Sphinx configuration.

The site follows the Diátaxis layout: tutorials (MyST notebooks executed at every build, so
they cannot go stale), how-to guides, explanation, results (rendered from the committed files
in ``benchmarks/results/``) and the API reference built from the numpydoc docstrings.

Build with ``python -m sphinx -W --keep-going -q -b html docs docs/_build/html`` (warnings are
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
    "myst_nb",
]

# numpydoc renders the Parameters/Returns/Attributes sections; autodoc lists the members
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_default_options = {"members": True, "show-inheritance": True}

# MyST: Markdown pages and notebooks.  Every tutorial is executed at every build (no cache:
# a tutorial that no longer runs fails the build); a cell that raises fails it too.
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 300
nb_execution_show_tb = True
# Markdown that a cell displays (the tables generated from the committed results) is MyST,
# with tables, not bare CommonMark
nb_render_markdown_format = "myst"

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
html_theme = "alabaster"
html_static_path: list[str] = []
