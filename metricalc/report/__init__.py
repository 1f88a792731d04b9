"""Rendering: figures (and, with the report issue, tables and the HTML report)."""
