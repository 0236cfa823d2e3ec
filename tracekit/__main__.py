"""``python -m tracekit``: the ``tracekit`` command."""

from tracekit.commands import main

if __name__ == "__main__":
    main()
