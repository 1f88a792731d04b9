"""Sphinx configuration of the metricalc documentation (MyST markdown, no network access).

Build with warnings as errors from the repository root::

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path

# autodoc imports the package; prefer the installed (editable) one, fall back to the checkout.
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# -- Project information -------------------------------------------------------------------

project = "metricalc"
author = "The metricalc developers"
copyright = "The metricalc developers"
try:
    release = package_version("metricalc")
except PackageNotFoundError:  # a checkout that was never installed
    release = "0+unknown"
version = ".".join(release.split(".")[:2])

# -- General configuration -----------------------------------------------------------------

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []
language = "en"

# MyST: $...$ and $$...$$ math, LaTeX environments (align, ...) without a directive, and
# heading anchors so pages can link to sections with [text](page.md#anchor).
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# -- autodoc / napoleon (numpydoc-style docstrings) ----------------------------------------

napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}

# -- HTML output ---------------------------------------------------------------------------

html_theme = "alabaster"  # built into Sphinx: no extra theme package needed
html_title = f"metricalc {release}"
html_static_path: list[str] = []
html_theme_options = {
    "description": "Decomposable metrics for local image descriptors",
    "fixed_sidebar": True,
}


# -- Hooks ---------------------------------------------------------------------------------


def _drop_builtin_type_docstrings(app, what, name, obj, options, lines):
    """Keep module constants (``AP_METHODS``, a tuple) from showing the docstring of ``tuple``.

    autodoc falls back to ``type(obj).__doc__`` for data without a documentation comment; the
    directive's own content then explains the constant instead.
    """
    if what not in ("data", "attribute"):
        return
    type_doc = type(obj).__doc__
    if type_doc and lines and type_doc.strip().splitlines()[0].strip() == lines[0].strip():
        lines.clear()


def setup(app):
    app.connect("autodoc-process-docstring", _drop_builtin_type_docstrings)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
