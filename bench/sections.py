"""Sections of ``bench/RESULTS.md`` that one bench script owns, between its two marker lines."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path, section: str, begin: str, end: str) -> None:
    """Replace the section between ``begin`` and ``end`` in ``path`` (``section`` carries both
    markers), or append it when absent; the rest of the file is left as it is (``bench/compare.py``
    carries the sections over when it regenerates the file)."""
    text = path.read_text() if path.exists() else ""
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text)
