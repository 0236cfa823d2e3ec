"""A trace's header made shareable: Kineto writes the capturing host's name and the (temporary)
export path into every trace (``host_name``, ``traceName``); neither belongs in a shared fixture.
Standard library only, so every capture script can use it on a GPU host without the analyzer."""

from __future__ import annotations

import json
import re

_HOST_NAME = re.compile(rb'("host_name":\s*)"(?:[^"\\]|\\.)*"')
_TRACE_NAME = re.compile(rb'("traceName":\s*)"(?:[^"\\]|\\.)*"')


def neutralise(data: bytes, trace_name: str) -> bytes:
    """``data`` (a trace's raw JSON) with ``host_name`` set to ``localhost`` and ``traceName`` to
    ``trace_name``, replaced in the raw text: every event stays byte-identical."""
    data = _HOST_NAME.sub(rb'\1"localhost"', data, count=1)
    return _TRACE_NAME.sub(lambda m: m.group(1) + json.dumps(trace_name).encode(), data, count=1)
