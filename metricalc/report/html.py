"""The self-contained HTML report: a jinja2 template, figures embedded as data URIs.

Every value is escaped by jinja2's autoescaping; the only markup passed through is the table
(:meth:`metricalc.plotting.Table.to_html`, which escapes its own names) and the HTML of registered
extra sections (:func:`metricalc.report.sections.register_section`). The page references no
external resource: styles are inline and images are ``data:image/png;base64,...`` URIs.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from metricalc.plotting.pages import page_environment

__all__ = ["EmbeddedFigure", "data_uri", "png_data_uri", "render_report"]


@dataclass(frozen=True)
class EmbeddedFigure:
    """A figure of the report: its file stem, title, caption and PNG as a data URI."""

    name: str
    title: str
    caption: str
    data_uri: str


def data_uri(png: str | Path) -> str:
    """``data:image/png;base64,...`` of a PNG file."""
    return "data:image/png;base64," + base64.b64encode(Path(png).read_bytes()).decode("ascii")


def png_data_uri(ax: Any) -> str:
    """``data:image/png;base64,...`` of the figure of ``ax``, rendered in memory (for a report
    whose figures are not kept as files)."""
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=120)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _environment() -> jinja2.Environment:
    return page_environment("metricalc.report")


def render_report(context: dict[str, Any]) -> str:
    """Render ``templates/report.html`` with ``context`` (see :func:`metricalc.report.build`
    for the keys); a missing key is an error (``StrictUndefined``)."""
    return _environment().get_template("report.html").render(**context)
