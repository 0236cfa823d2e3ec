"""``python -m capture ...``: the capture command without the rest of the tracekit CLI.

Runs on a GPU host that has torch but not the analyzer's dependencies (polars, msgspec). Same flags,
same error boundary semantics as ``tracekit capture``.
"""

from __future__ import annotations

from capture.cli import capture_command
from tracekit import boundary


def main(argv: list[str] | None = None) -> None:
    """``python -m capture``: the capture command behind tracekit's error boundary."""
    boundary.run(capture_command, argv, "python -m capture")


if __name__ == "__main__":
    main()
