"""Sphinx configuration for Pizza Bot's documentation (Markdown pages read by MyST).

Built in the test suite with warnings as errors, so a link to a page or heading that does not
exist fails the build: `python -m sphinx -W -b html docs build/docs`.
"""

project = "Pizza Bot"
author = "Pizza Bot contributors"
copyright = "Pizza Bot contributors"  # noqa: A001 (Sphinx's own name for it)

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# Headings up to ### get anchors, so pages can link to `page.md#a-heading`.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

html_theme = "alabaster"
html_title = "Pizza Bot"
html_static_path: list[str] = []
