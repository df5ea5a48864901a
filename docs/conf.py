"""Sphinx configuration of dlap's documentation (built with warnings as errors by the test suite)."""

import dlap

project = "dlap"
author = "the dlap developers"
copyright = "2026, the dlap developers"
release = version = dlap.__version__

extensions = ["myst_parser", "numpydoc", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"dlap {version}"
html_static_path = ["_static"]
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}
