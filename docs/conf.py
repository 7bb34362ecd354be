"""Sphinx configuration for graphcheck's documentation (``nox -s docs`` builds it)."""

from __future__ import annotations

import os
import sys

# The repository root, so that `import graphcheck` works without installing it.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

import warp as wp  # noqa: E402

wp.config.log_level = wp.LOG_WARNING  # no start-up banner in the build log

import graphcheck  # noqa: E402

project = "graphcheck"
author = "graphcheck developers"
copyright = "graphcheck developers"  # noqa: A001
release = graphcheck.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
]
# sphinx.ext.intersphinx is left out on purpose: the build machines have no internet,
# and a failed inventory fetch is a warning, which -W turns into an error.

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "findings/examples"]

# MyST: ::: fences for directives, and anchors for headings down to level 3.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc and napoleon: Google-style docstrings, members in source order.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
napoleon_attr_annotations = True

html_theme = "furo"
html_title = f"graphcheck {release}"
html_static_path = ["_static"]
pygments_style = "sphinx"
pygments_dark_style = "monokai"


# -- included files: trim blank lines --------------------------------------------------
# The pages include parts of the example programs between marker comments; the blank
# lines PEP 8 puts around top-level definitions would show at the ends of each part.


def _trim_included_blocks(app, doctree):
    from docutils import nodes

    for block in doctree.findall(nodes.literal_block):
        if "source" not in block:  # not a literalinclude
            continue
        text = block.astext()
        lines = text.split("\n")
        leading = 0
        while leading < len(lines) - 1 and not lines[leading].strip():
            leading += 1
        trimmed = "\n".join(lines[leading:]).rstrip()
        if trimmed == text:
            continue
        args = block.get("highlight_args", {})
        if leading and "linenostart" in args:
            args["linenostart"] += leading
        block.children = [nodes.Text(trimmed)]
        block.rawsource = trimmed


def setup(app):
    app.connect("doctree-read", _trim_included_blocks)
