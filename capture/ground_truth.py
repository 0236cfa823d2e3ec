"""What the runtime itself says happened during a capture, recorded beside the trace as ground truth.

Contract: each reader asks torch (Dynamo, Inductor's CUDA-graph trees, the caching allocator) or
Triton directly, never the trace, so a test can hold an analysis of the trace against an independent
account. Readers are best effort: a figure the running torch/triton does not expose is recorded as
``None`` (with the error text where there was one) and never raised, because a capture must not fail
over its own bookkeeping.

- :func:`dynamo_counters` / :func:`counters_delta`: ``torch._dynamo.utils.counters`` (``stats``
  ``unique_graphs`` and ``calls_captured``, ``frames``, ``aot_autograd``, ``inductor`` … whatever the
  running torch keeps) as plain dicts, and the change between two snapshots.
- :class:`CompilationLog`: Dynamo's own CompilationMetrics records (compile id ``F/C`` as in the trace's
  ``Torch-Compiled Region: F/C``, recompile reason, phase times) added since the last look. A frame
  compilation has ``is_runtime`` false; torch also files ``is_runtime`` records for compile work done
  when a compiled graph first runs (Inductor's Triton autotuning, CUDA-graph recording), under the
  compile id of the graph that ran.
- :func:`cudagraph_state`: the CUDA-graph tree manager's state after a call (``WARMUP``, ``RECORDING``
  or ``EXECUTION`` = replay) and how many graphs it has recorded.
- :func:`triton_cache_entries`: compiled kernels in the Triton cache directory in use (a call that adds
  one compiled a Triton kernel: the JIT of a hand-written kernel, or Inductor's codegen).
- :class:`AllocatorProbe`: the CUDA caching allocator's figures per unit (profiler step or call) and for
  the whole profiled window: peak allocated/reserved (``reset_peak_memory_stats()`` at each unit's
  start), bytes allocated before and after, and the number of allocation/free requests.

torch is imported inside functions only.
"""

from __future__ import annotations

import os
import re
from typing import Any

# CompilationMetrics fields kept per compilation (the record has ~80, most of them configuration dumps).
_METRIC_FIELDS = (
    "compile_id", "frame_key", "co_name", "recompile_reason", "fail_type", "fail_reason",
    "entire_frame_compile_time_s", "backend_compile_time_s", "inductor_compile_time_s", "code_gen_time_s",
    "triton_compile_time_us", "dynamo_time_before_restart_s", "gc_time_us", "guard_count",
    "shape_env_guard_count", "graph_op_count", "graph_node_count", "graph_input_count", "graph_node_shapes",
    "num_graph_breaks", "is_forward", "is_runtime", "cache_size", "accumulated_cache_size", "start_time_us",
    "duration_us", "runtime_triton_autotune_time_us", "runtime_cudagraphify_time_us",
    "compile_time_autotune_time_us", "dynamo_cumulative_compile_time_us", "aot_autograd_cumulative_compile_time_us",
    "inductor_cumulative_compile_time_us", "inductor_fx_local_cache_hit_count", "inductor_fx_local_cache_miss_count",
)


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple, list)):
        return [_plain(v) for v in (sorted(value, key=str) if isinstance(value, (set, frozenset)) else value)]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def dynamo_counters() -> dict[str, dict[str, int]]:
    """A snapshot of ``torch._dynamo.utils.counters`` ({category: {name: count}})."""
    from torch._dynamo.utils import counters

    return {str(cat): {str(k): int(v) for k, v in c.items()} for cat, c in counters.items()}


def counters_delta(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Counters that changed between two snapshots, by category (unchanged ones left out)."""
    out: dict[str, dict[str, int]] = {}
    for cat in sorted(set(before) | set(after)):
        b, a = before.get(cat, {}), after.get(cat, {})
        changed = {k: a.get(k, 0) - b.get(k, 0) for k in sorted(set(a) | set(b)) if a.get(k, 0) != b.get(k, 0)}
        if changed:
            out[cat] = changed
    return out


def unique_graphs(snapshot: dict[str, dict[str, int]]) -> int:
    return snapshot.get("stats", {}).get("unique_graphs", 0)


class CompilationLog:
    """Dynamo's CompilationMetrics records, handed out once each (:meth:`new` returns those not yet seen)."""

    def __init__(self) -> None:
        self._seen: list[Any] = []
        self.error: str | None = None
        self.new()  # records from before this log started are not ours

    def _all(self) -> list[Any]:
        try:
            from torch._dynamo.utils import get_compilation_metrics

            return list(get_compilation_metrics())
        except Exception as err:  # an older or newer torch without the API
            self.error = f"{type(err).__name__}: {err}"
            return []

    def new(self) -> list[dict[str, Any]]:
        records = self._all()
        fresh = [m for m in records if not any(m is s for s in self._seen)]
        self._seen = records
        return [{f: _plain(getattr(m, f)) for f in _METRIC_FIELDS if getattr(m, f, None) is not None} for m in fresh]


_COUNT = re.compile(r"count\((-?\d+)")


def _count_value(counter: Any) -> int | None:
    # itertools.count has no public read; its repr is "count(N)" or "count(N, step)".
    m = _COUNT.match(repr(counter))
    return int(m.group(1)) if m else None


def cudagraph_state(device_index: int = 0) -> dict[str, Any] | None:
    """The CUDA-graph tree manager after a call: its path state and the graphs recorded so far."""
    try:
        from torch._inductor import cudagraph_trees

        manager = cudagraph_trees.get_manager(device_index, create_if_none_exists=False)
        if manager is None:
            return {"path_state": None, "graphs_recorded": 0}
        recorded = _count_value(manager.graph_counter)
        warmups = _count_value(manager.warmup_node_counter)  # counts down from -1
        return {
            "path_state": manager.path_state.name,
            "graphs_recorded": recorded,
            "warmup_nodes": None if warmups is None else -warmups - 1,
        }
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"}


def triton_cache_dir() -> str | None:
    path = os.environ.get("TRITON_CACHE_DIR")
    if path:
        return path
    try:
        from triton import knobs

        return str(knobs.cache.dir)
    except Exception:
        return None


def triton_cache_entries() -> int | None:
    """Compiled kernels (one folder each) in the Triton cache directory now in use; None without Triton."""
    path = triton_cache_dir()
    if path is None:
        return None
    try:
        return sum(1 for e in os.scandir(path) if e.is_dir())
    except FileNotFoundError:
        return 0
    except OSError:
        return None


class AllocatorProbe:
    """The CUDA caching allocator's own figures for a profiled window made of units (steps or calls).

    ``reset_peak_memory_stats()`` runs at the start of every unit, so each unit's peak is its own; the
    window's peak is the largest unit peak, which equals what one reset at the window's start would
    read, because every allocation of the window happens inside a unit. Allocation and free counts are
    the allocator's cumulative request counters (``memory_stats()``) differenced over the window. On a
    device without a caching allocator (CPU) :meth:`result` says so and records nothing else.
    """

    _COUNTERS = {
        "allocations": "allocation.all.allocated",
        "frees": "allocation.all.freed",
        "bytes_allocated": "allocated_bytes.all.allocated",
        "bytes_freed": "allocated_bytes.all.freed",
    }

    def __init__(self, device: str, device_index: int = 0) -> None:
        self.enabled = device == "cuda"
        self.device_index = device_index
        self.units: list[dict[str, Any]] = []
        self._window: dict[str, Any] = {}

    def _stats(self) -> dict[str, int]:
        import torch

        stats = torch.cuda.memory_stats(self.device_index)
        return {k: int(stats.get(v, 0)) for k, v in self._COUNTERS.items()}

    def window_begin(self) -> None:
        if not self.enabled:
            return
        import torch

        self._window = {
            "allocated_before": torch.cuda.memory_allocated(self.device_index),
            "reserved_before": torch.cuda.memory_reserved(self.device_index),
            "_stats_before": self._stats(),
        }

    def unit_begin(self) -> None:
        if self.enabled:
            import torch

            self._unit_start = torch.cuda.memory_allocated(self.device_index)
            torch.cuda.reset_peak_memory_stats(self.device_index)

    def unit_end(self, unit: str) -> None:
        if not self.enabled:
            return
        import torch

        i = self.device_index
        self.units.append({
            "unit": unit,
            "allocated_before": self._unit_start,
            "allocated_after": torch.cuda.memory_allocated(i),
            "max_allocated": torch.cuda.max_memory_allocated(i),
            "max_reserved": torch.cuda.max_memory_reserved(i),
        })

    def window_end(self) -> None:
        if not self.enabled or not self._window:
            return
        import torch

        before = self._window.pop("_stats_before")
        after = self._stats()
        self._window.update(
            allocated_after=torch.cuda.memory_allocated(self.device_index),
            reserved_after=torch.cuda.memory_reserved(self.device_index),
            **{k: after[k] - before[k] for k in self._COUNTERS},
        )

    def result(self) -> dict[str, Any]:
        if not self.enabled:
            return {"available": False, "reason": "no CUDA caching allocator on this device"}
        window = dict(self._window)
        if self.units:
            window["max_allocated"] = max(u["max_allocated"] for u in self.units)
            window["max_reserved"] = max(u["max_reserved"] for u in self.units)
        return {
            "available": True,
            "device_index": self.device_index,
            "unit": "bytes",
            "method": "torch.cuda.reset_peak_memory_stats() at each unit's start; max_memory_allocated(), "
                      "max_memory_reserved(), memory_allocated() at its end; the window's max is the largest "
                      "unit max; allocations/frees/bytes from memory_stats() counters over the window",
            "window": window,
            "units": self.units,
        }
