"""The cells of a paper table: their letters, marks and markup in each output format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["MARKUP", "Cell", "markup", "row_letter"]


def row_letter(index: int) -> str:
    """The letter of row ``index`` (0-based): a .. z, then aa, ab, ...

    Examples
    --------
    >>> row_letter(0), row_letter(25), row_letter(26), row_letter(27)
    ('a', 'z', 'aa', 'ab')
    """
    letters = ""
    index += 1
    while index > 0:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


@dataclass(frozen=True)
class Cell:
    """One table cell: the value, its printed text, its mark and its significance letters."""

    value: float
    text: str
    mark: str  # "best", "second" or ""
    letters: str


MARKUP = {  # format: (dash, best, second, letters)
    "latex": ("--", r"\textbf{{{}}}", r"\underline{{{}}}", r"\textsuperscript{{{}}}"),
    "markdown": ("&ndash;", "**{}**", "<u>{}</u>", "<sup>{}</sup>"),
    "html": ("&ndash;", "<strong>{}</strong>", "<u>{}</u>", "<sup>{}</sup>"),
}


def markup(cell: Cell, style: str, escape: Callable[[str], str]) -> str:
    """A cell in one output format: a dash for no value, else the (escaped) number, bold or
    underlined by its mark, then its letters as a superscript."""
    dash, best, second, letters = MARKUP[style]
    if not cell.text:
        return dash
    text = escape(cell.text)
    if cell.mark:
        text = (best if cell.mark == "best" else second).format(text)
    return text + (letters.format(cell.letters) if cell.letters else "")
