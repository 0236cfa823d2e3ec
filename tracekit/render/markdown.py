"""The ``md`` format: GitHub-flavoured Markdown (``.md``, ``.markdown``) of any document.

The report reads as a document, the diff, check and compare as pull-request comments; the text and
its escaping are :mod:`tracekit.render.gfm`'s.
"""

from __future__ import annotations

from typing import TextIO

from tracekit.render.base import DocumentRenderer
from tracekit.render.document import Document
from tracekit.render.gfm import document_text


class MarkdownRenderer(DocumentRenderer):
    """GitHub Markdown (``.md``, ``.markdown``)."""

    name = "md"
    extensions = (".md", ".markdown")

    def print(self, document: Document, out: TextIO, *, color: bool = False, width: int | None = None) -> None:
        out.write(document_text(document))
