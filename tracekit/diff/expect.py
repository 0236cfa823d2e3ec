"""Expectations for ``tracekit check TRACE --expect FILE.toml``: "guess first, then look" as a CI test.

The file states what one step should look like; every profiled step must meet every expectation
(``unit = "mlp_fwd"`` checks each span of that annotation instead). Example::

    description = "torch.compile fuses GeLU and mul: four kernels, no ATen elementwise"
    # unit = "mlp_fwd"                 # optional

    [per_step]
    kernels = 4                        # exact kernel count (also kernels_min, kernels_max)
    classes_present = ["gemm", "triton_fused"]
    classes_absent = ["elementwise"]
    kernels_present = ["triton_poi_fused_*gelu*mul*"]   # glob on the full kernel name
    round_trip_bytes_max = 0
    # peak_memory_max = "6GiB"         # bytes, or a size with B, KB, MB, GB, KiB, MiB, GiB
    gpu_busy_min_pct = 10

Keys of ``[per_step]`` (all optional): ``kernels``, ``kernels_min``, ``kernels_max``,
``launches_max``, ``memsets_max``, ``memcpys_max`` (integers); ``classes_present``,
``classes_absent`` (kernel classes as ``tracekit report`` names them); ``kernels_present``,
``kernels_absent``, ``cpu_ops_present``, ``cpu_ops_absent`` (glob patterns: ``*`` and ``?``);
``round_trip_bytes_max``, ``round_trip_tensors_max`` (integers); ``peak_memory_max`` (bytes, an
integer or a size such as ``"2GiB"``: the highest allocated GPU memory in the step, from the trace's
``[memory]`` events); ``gpu_busy_min_pct`` (GPU busy as
a % of the step's wall time); ``gpu_time_max_us``, ``cpu_time_max_us``, ``idle_time_max_us``,
``preop_tax_max_us`` (µs); ``compile_preops`` (true: torch.compile wrappers present, false: absent);
``no_finding`` (rule ids of :data:`tracekit.findings.RULES`, e.g. ``["host_sync", "fp32_gemm"]``:
met when the trace has no such finding in any of its units; findings are judged over the trace's
steady units, so this key lives in ``[per_step]`` with the other per-unit expectations).

:func:`parse` validates the file's text (the caller reads the file:
:func:`tracekit.session.read_expectations`); :func:`check` tests a profile against it.

A malformed file, an unknown key or a wrong type is a usage error (exit 2, one line). An
expectation that needs a figure the trace cannot give (round trips not computed) is one too.
"""

from __future__ import annotations

import operator
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

import polars as pl

from tracekit.analyses.profile import Profile
from tracekit.classify.names import short_kernel_name
from tracekit.errors import UsageError
from tracekit.results.check import CheckResult, Item

_INT_KEYS = ("kernels", "kernels_min", "kernels_max", "launches_max", "memsets_max", "memcpys_max",
             "round_trip_bytes_max", "round_trip_tensors_max", "peak_memory_max")
_NUM_KEYS = ("gpu_busy_min_pct", "gpu_time_max_us", "cpu_time_max_us", "idle_time_max_us",
             "preop_tax_max_us")
_LIST_KEYS = ("classes_present", "classes_absent", "kernels_present", "kernels_absent",
              "cpu_ops_present", "cpu_ops_absent", "no_finding")
_BOOL_KEYS = ("compile_preops",)
PER_STEP_KEYS = _INT_KEYS + _NUM_KEYS + _LIST_KEYS + _BOOL_KEYS
TOP_KEYS = ("description", "unit", "per_step")


@dataclass(frozen=True)
class Expectations:
    path: str
    description: str
    unit: str | None
    per_step: dict[str, Any]


#: An expectations file is a few hundred bytes; past this it is not one (and a million-entry list
#: would make every glob test slow).
MAX_FILE_BYTES = 1 << 20
#: Patterns in one list.
MAX_LIST_ITEMS = 1000


def parse(text: str, name: str) -> Expectations:
    """Validate the TOML ``text`` of the expectations file ``name`` (see the module docstring; the
    caller reads the file: :func:`tracekit.session.read_expectations`). TOML nested deeper than the
    parser goes, or a list past :data:`MAX_LIST_ITEMS`, is refused."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{name}: not valid TOML ({str(err).splitlines()[0]})") from None
    except RecursionError:
        raise UsageError(f"{name}: TOML nested deeper than the parser goes") from None
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise UsageError(f"{name}: unknown key {_shown(unknown[0])} (top-level keys: {', '.join(TOP_KEYS)})")
    per_step = data.get("per_step", {})
    if not isinstance(per_step, dict) or not per_step:
        raise UsageError(f"{name}: needs a [per_step] table with at least one expectation")
    for key, value in per_step.items():
        if key not in PER_STEP_KEYS:
            raise UsageError(f"{name}: unknown expectation {_shown(key)} in [per_step] "
                             f"(known: {', '.join(PER_STEP_KEYS)})")
        if key == "peak_memory_max" and isinstance(value, str):
            from tracekit.diff.gates import size_bytes

            parsed = size_bytes(value)
            value = per_step[key] = parsed if parsed is not None else value
        ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0 if key in _INT_KEYS
              else isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
              if key in _NUM_KEYS
              else isinstance(value, list) and all(isinstance(v, str) for v in value) if key in _LIST_KEYS
              else isinstance(value, bool))
        if not ok:
            want = ("a non-negative integer" if key in _INT_KEYS else "a non-negative number"
                    if key in _NUM_KEYS else "a list of strings" if key in _LIST_KEYS else "true or false")
            raise UsageError(f"{name}: [per_step] {key} must be {want}, got {_shown(value)}")
        if key in _LIST_KEYS and len(value) > MAX_LIST_ITEMS:
            raise UsageError(f"{name}: [per_step] {key} has {len(value):,} patterns (at most {MAX_LIST_ITEMS:,})")
        if key == "no_finding":
            from tracekit.findings import RULES

            unknown_rules = [v for v in value if v not in RULES]
            if unknown_rules:
                raise UsageError(f"{name}: [per_step] no_finding: unknown rule {_shown(unknown_rules[0])} "
                                 f"(rules: {', '.join(RULES)})")
    for key in ("description", "unit"):
        if key in data and not isinstance(data[key], str):
            raise UsageError(f"{name}: {key} must be a string")
    return Expectations(name, data.get("description", ""), data.get("unit"), per_step)


def _shown(value: Any) -> str:
    """A wrong value as the error line shows it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _names_per_unit(frame: pl.DataFrame, units: list[int], column: str) -> list[set[str]]:
    sets: dict[int, set[str]] = {u: set() for u in units}
    for unit, name in zip(frame["unit"].to_list(), frame[column].to_list()):
        sets.setdefault(unit, set()).add(name)
    return [sets[u] for u in units]


#: Bounds: key -> (per_unit column, op, unit). The file's value is compared in the unit's scale
#: (µs for time limits, % for busy), the per-unit column holds ns / fractions.
_BOUNDS: dict[str, tuple[str, str, str]] = {
    "kernels": ("kernels", "==", "count"), "kernels_min": ("kernels", ">=", "count"),
    "kernels_max": ("kernels", "<=", "count"), "launches_max": ("launches", "<=", "count"),
    "memsets_max": ("memsets", "<=", "count"), "memcpys_max": ("memcpys", "<=", "count"),
    "round_trip_bytes_max": ("round_trip_bytes", "<=", "bytes"),
    "round_trip_tensors_max": ("round_trip_tensors", "<=", "count"),
    "peak_memory_max": ("peak_memory", "<=", "bytes"),
    "gpu_busy_min_pct": ("busy_frac", ">=", "percent"),
    "gpu_time_max_us": ("gpu_ns", "<=", "ns"), "cpu_time_max_us": ("cpu_dispatch_ns", "<=", "ns"),
    "idle_time_max_us": ("idle_ns", "<=", "ns"), "preop_tax_max_us": ("preop_tax_ns", "<=", "ns"),
}
_TESTS = {"==": operator.eq, ">=": operator.ge, "<=": operator.le}
#: Per-unit columns that need an analysis the trace may not have, and the metric that says so.
_NEEDS = {"cpu_dispatch_ns": "cpu_time", "idle_ns": "idle_time", "round_trip_bytes": "round_trip_bytes",
          "round_trip_tensors": "round_trip_tensors"}


def _in_unit(unit: str, value: float) -> float:
    """A per-unit column value (ns, fraction) in the scale of the expectation (µs, %)."""
    return value / 1000 if unit == "ns" else 100 * value if unit == "percent" else value


def _ns(us: int | float) -> int | float:
    # Held in ns like every other time; rounded so that 1.1 µs is 1100.0 ns, not 1100.0000000000002.
    return us * 1000 if isinstance(us, int) else round(us * 1000, 6)


def check(profile: Profile, exp: Expectations) -> CheckResult:
    """Test every expectation against every unit of ``profile``."""
    pu = profile.per_unit
    n_units = len(profile.units)
    items: list[Item] = []

    def bound(key: str, value: int | float) -> Item:
        col, op, unit = _BOUNDS[key]
        metric = _NEEDS.get(col)
        if col == "peak_memory" and pu[col].null_count() == pu.height:
            raise UsageError(f"{exp.path}: {key} cannot be checked: the trace has no [memory] events "
                             "(record them with profile_memory=True)")
        if metric in profile.unavailable:
            raise UsageError(f"{exp.path}: {key} cannot be checked: {profile.unavailable[metric]}")
        values = [v for v in pu[col].to_list() if v is not None]
        meets = [_TESTS[op](_in_unit(unit, v), value) for v in values]
        shown = [100 * v for v in values] if unit == "percent" else values
        return Item(key, bool(values) and all(meets) if n_units else False, unit, op,
                    _ns(value) if unit == "ns" else value, len(values), sum(meets),
                    min(shown) if shown else None, max(shown) if shown else None)

    spec = exp.per_step
    for key, value in spec.items():
        if key in _BOUNDS:
            items.append(bound(key, value))
        elif key == "compile_preops":
            present = [bool(s) for s in _names_per_unit(profile.preops, profile.units, "kind")]
            items.append(Item(key, bool(present) and all(p == value for p in present), "bool", "==", value,
                              len(present), sum(p == value for p in present), steps_present=sum(present)))
        elif key == "no_finding":
            for rule in value:
                hit = next((f for f in profile.findings if f.rule == rule), None)
                present = len(set(hit.steps) & set(profile.units)) if hit is not None else 0
                if hit is not None and present == 0:  # a trace-wide finding (a cold step set aside)
                    present = n_units
                items.append(Item(key, n_units > 0 and hit is None, "names", "absent", rule, n_units,
                                  n_units - present, steps_present=present,
                                  example=hit.title if hit is not None else None))
        elif key in _LIST_KEYS:
            source = {"classes": (profile.class_ns, "kernel_class"), "kernels": (profile.kernel_ns, "name"),
                      "cpu_ops": (profile.cpu_ops, "name")}[key.rsplit("_", 1)[0]]
            per_unit = _names_per_unit(source[0], profile.units, source[1])
            want_present = key.endswith("_present")
            for pattern in value:
                hits = [sorted(n for n in names if fnmatchcase(n, pattern)) for names in per_unit]
                steps_with = sum(1 for h in hits if h)
                first = next((h[0] for h in hits if h), None)
                if first is not None and key.startswith("kernels"):
                    first = short_kernel_name(first)
                met = n_units > 0 and steps_with == n_units if want_present else steps_with == 0
                items.append(Item(key, met, "names", "present" if want_present else "absent", pattern, n_units,
                                  steps_with if want_present else n_units - steps_with,
                                  steps_present=steps_with, example=first))
    notes = []
    if n_units == 0:
        notes.append("the trace has no steps to check")
    busy_note = ("GPU busy % is busy time over the step's wall time (launch gaps)"
                 if "cpu_time" not in profile.unavailable else
                 "GPU busy % is busy time over the step's CPU span (launch gaps not computed)")
    if "gpu_busy_min_pct" in spec:
        notes.append(busy_note)
    units = ", ".join(profile.unit_labels[u] for u in profile.units)
    notes.append(f"checked {n_units} {profile.unit_kind} unit(s): {units}")
    return CheckResult(profile.label, exp.description, tuple(items), tuple(notes))
