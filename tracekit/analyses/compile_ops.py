"""The wrapper ops torch.compile runs around a compiled graph on every call.

Names as torch 2.x writes them (cpu_op or user_annotation spans); the hash in
``## Call CompiledFxGraph <hash> ##`` is Inductor's graph key. These are CPU "tax", not the user's
own dispatch, so the op tree does not treat them as the user's annotation and the zero-kernel list
leaves them to the compile pre-ops table.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: (kind, regex on the op name), in the order torch runs them.
COMPILE_PREOPS: tuple[tuple[str, str], ...] = (
    ("cache_lookup", r"^TorchDynamo Cache Lookup$"),
    ("compiled_region", r"^Torch-Compiled Region: \d+/\d+$"),
    ("pregraph_bytecode", r"^Pregraph bytecode$"),
    ("aot_prologue", r"^AOTDispatcher Runtime Wrapper Prologue$"),
    ("call_compiled_graph", r"^## Call CompiledFxGraph \S+ ##$"),
    ("compiled_function", r"^CompiledFunction$"),
)
GRAPH_HASH = r"^## Call CompiledFxGraph (\S+) ##$"
_COMPILED = tuple((kind, re.compile(p)) for kind, p in COMPILE_PREOPS)


@lru_cache(maxsize=4096)
def preop_kind(name: str) -> str | None:
    """The pre-op kind of ``name`` (e.g. ``"cache_lookup"``), or None for any other op."""
    for kind, pattern in _COMPILED:
        if pattern.match(name):
            return kind
    return None

