"""The jinja2 environment of metricalc's HTML pages (the report of a study, ``metricalc inspect``).

Each page's package keeps its templates in its own ``templates`` folder; the fragments every page
shares are in this package's (``page.html``: the macro ``page_head``, the start of a page up to
its ``<style>``).
"""

from __future__ import annotations

import jinja2

__all__ = ["page_environment"]


def page_environment(package: str) -> jinja2.Environment:
    """The environment of the templates of ``package`` (its ``templates`` folder, then the shared
    fragments): autoescaped, a missing variable an error (``StrictUndefined``), block tags on
    their own lines leaving no blank lines (``trim_blocks``, ``lstrip_blocks``).

    Examples
    --------
    >>> page = page_environment("metricalc.report").from_string(
    ...     '{% from "page.html" import page_head %}{{ page_head("a < b", "metricalc") }}')
    >>> page.render().splitlines()[-1]
    '<title>a &lt; b</title>'
    """
    return jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [
                jinja2.PackageLoader(package, "templates"),
                jinja2.PackageLoader("metricalc.plotting", "templates"),
            ]
        ),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
