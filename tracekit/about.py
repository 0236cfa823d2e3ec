"""What tracekit is called where it is installed from.

The command and the import are ``tracekit``; the distribution on the package index is
:data:`DISTRIBUTION`, because the name ``tracekit`` there belongs to an unrelated project (a waveform
analysis tool): ``pip install tracekit`` installs that project, not this one. Every install hint the
tool prints comes from :func:`install_hint`, so none can name the wrong package.
"""

from __future__ import annotations

#: The distribution name: ``pip install tracekit-torch`` installs the ``tracekit`` command and package.
DISTRIBUTION = "tracekit-torch"


def install_hint(extra: str) -> str:
    """The pip command that installs this project with ``extra`` (``capture``, ``hta``, ``docs``…)."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"
