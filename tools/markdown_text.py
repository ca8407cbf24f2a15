"""Text from a result file, written into a Markdown page as text: the one escaping rule of the
renderers (tools/render_docs.py for README.md, docs/*.md and the labs; tools/claims.py for
CLAIMS.md). A value holding HTML, the renderers' own block markers or Markdown syntax shows as
what it is and can neither break a table, add a link or HTML, nor end or open a generated block
(tests/docs/test_docs_numbers.py)."""

from __future__ import annotations

import re

# What a text from a result file may not carry into a page as itself: HTML (a comment is also
# the renderer's own block marker, so "<!-- /zg:table -->" in a value would end its block), and
# the Markdown that would make it something other than text (code, emphasis, links, a table
# cell's end). Each is written as an entity or a backslash escape; the page shows the text.
_ESCAPES = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "\\": "\\\\",
    "`": "\\`",
    "*": "\\*",
    "_": "\\_",
    "[": "\\[",
    "]": "\\]",
    "|": "\\|",
}
_UNSAFE = re.compile("[" + re.escape("".join(_ESCAPES)) + "]")
# Intraword underscores are plain text in Markdown ("a_b"): only one at a word's edge can open
# or close emphasis, so only those are escaped (the names of metrics and benches stay readable).
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def cell(text: object, *, pipes: bool = True) -> str:
    """A value from a result file as text in a page: one line (whitespace collapsed), fit for a
    Markdown table cell, with every character that Markdown or HTML would read as markup
    escaped (see ``_ESCAPES``), so no value can break the table, add a link or HTML, or end or
    open a generated block. ``pipes=False`` leaves ``|`` for a caller that escapes a whole row's
    cells itself (tools/claims.py)."""
    if text is None:
        return ""
    flat = " ".join(str(text).split())

    def escape(m: re.Match) -> str:
        ch = m.group(0)
        if (ch == "_" and not _EDGE_UNDERSCORE.match(flat, m.start())) or (ch == "|" and not pipes):
            return ch
        return _ESCAPES[ch]

    return _UNSAFE.sub(escape, flat)


_CODE_SAFE = re.compile(r"[0-9A-Za-z_.,:=+\-/ ]+")


def code(text: object) -> str:
    """A name from a result file as inline code when it is a plain name, else as escaped text
    (a code span cannot escape a backtick, and the renderer's markers are matched in the raw
    page, code spans included)."""
    text = "" if text is None else " ".join(str(text).split())
    return f"`{text}`" if _CODE_SAFE.fullmatch(text) else cell(text)
