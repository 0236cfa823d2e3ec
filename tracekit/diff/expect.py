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
    gpu_busy_min_pct = 10

Keys of ``[per_step]`` (all optional): ``kernels``, ``kernels_min``, ``kernels_max``,
``launches_max``, ``memsets_max``, ``memcpys_max`` (integers); ``classes_present``,
``classes_absent`` (kernel classes as ``tracekit report`` names them); ``kernels_present``,
``kernels_absent``, ``cpu_ops_present``, ``cpu_ops_absent`` (glob patterns: ``*`` and ``?``);
``round_trip_bytes_max``, ``round_trip_tensors_max`` (integers); ``gpu_busy_min_pct`` (GPU busy as
a % of the step's wall time); ``gpu_time_max_us``, ``cpu_time_max_us``, ``idle_time_max_us``,
``preop_tax_max_us`` (µs); ``compile_preops`` (true: torch.compile wrappers present, false: absent).

A malformed file, an unknown key or a wrong type is a usage error (exit 2, one line). An
expectation that needs a figure the trace cannot give (round trips not computed) is one too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

import polars as pl

from tracekit.classify.names import short_kernel_name
from tracekit.diff.profile import Profile
from tracekit.errors import UsageError

_INT_KEYS = ("kernels", "kernels_min", "kernels_max", "launches_max", "memsets_max", "memcpys_max",
             "round_trip_bytes_max", "round_trip_tensors_max")
_NUM_KEYS = ("gpu_busy_min_pct", "gpu_time_max_us", "cpu_time_max_us", "idle_time_max_us",
             "preop_tax_max_us")
_LIST_KEYS = ("classes_present", "classes_absent", "kernels_present", "kernels_absent",
              "cpu_ops_present", "cpu_ops_absent")
_BOOL_KEYS = ("compile_preops",)
PER_STEP_KEYS = _INT_KEYS + _NUM_KEYS + _LIST_KEYS + _BOOL_KEYS
TOP_KEYS = ("description", "unit", "per_step")


@dataclass(frozen=True)
class Expectations:
    path: str
    description: str
    unit: str | None
    per_step: dict[str, Any]


@dataclass(frozen=True)
class Item:
    key: str
    expected: str
    observed: str
    met: bool


@dataclass(frozen=True)
class CheckResult:
    trace: str
    description: str
    items: tuple[Item, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return all(i.met for i in self.items)


def load(path: str | Path) -> Expectations:
    """Read and validate an expectations file (see module docstring)."""
    name = Path(path).name
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{name}: no such expectations file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{name}: cannot read ({err})") from None
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{name}: not valid TOML ({err})") from None
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise UsageError(f"{name}: unknown key {unknown[0]!r} (top-level keys: {', '.join(TOP_KEYS)})")
    per_step = data.get("per_step", {})
    if not isinstance(per_step, dict) or not per_step:
        raise UsageError(f"{name}: needs a [per_step] table with at least one expectation")
    for key, value in per_step.items():
        if key not in PER_STEP_KEYS:
            raise UsageError(f"{name}: unknown expectation {key!r} in [per_step] "
                             f"(known: {', '.join(PER_STEP_KEYS)})")
        ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0 if key in _INT_KEYS
              else isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
              if key in _NUM_KEYS
              else isinstance(value, list) and all(isinstance(v, str) for v in value) if key in _LIST_KEYS
              else isinstance(value, bool))
        if not ok:
            want = ("a non-negative integer" if key in _INT_KEYS else "a non-negative number"
                    if key in _NUM_KEYS else "a list of strings" if key in _LIST_KEYS else "true or false")
            raise UsageError(f"{name}: [per_step] {key} must be {want}, got {value!r}")
    for key in ("description", "unit"):
        if key in data and not isinstance(data[key], str):
            raise UsageError(f"{name}: {key} must be a string")
    return Expectations(name, data.get("description", ""), data.get("unit"), per_step)


def _range(values: list[float], fmt) -> str:
    if not values:
        return "no steps"
    lo, hi = min(values), max(values)
    return f"{fmt(lo)} in every step" if lo == hi else f"{fmt(lo)}–{fmt(hi)} across steps"


def _names_per_unit(frame: pl.DataFrame, units: list[int], column: str) -> list[set[str]]:
    sets: dict[int, set[str]] = {u: set() for u in units}
    for unit, name in zip(frame["unit"].to_list(), frame[column].to_list()):
        sets.setdefault(unit, set()).add(name)
    return [sets[u] for u in units]


def check(profile: Profile, exp: Expectations) -> CheckResult:
    """Test every expectation against every unit of ``profile``."""
    pu = profile.per_unit
    n_units = len(profile.units)
    items: list[Item] = []
    count = lambda v: f"{int(v):,}"  # noqa: E731
    micro = lambda v: f"{v / 1000:,.1f} µs"  # noqa: E731

    def column(col: str, key: str) -> list[float]:
        if col in ("cpu_dispatch_ns", "idle_ns", "round_trip_bytes", "round_trip_tensors"):
            metric = {"cpu_dispatch_ns": "cpu_time", "idle_ns": "idle_time"}.get(col, col)
            if metric in profile.unavailable:
                raise UsageError(f"{exp.path}: {key} cannot be checked: {profile.unavailable[metric]}")
        return [v for v in pu[col].to_list() if v is not None]

    def bound(key: str, col: str, expected_text: str, test, fmt, scale: float = 1.0) -> None:
        values = column(col, key)
        met = bool(values) and all(test(v / scale) for v in values) if n_units else False
        items.append(Item(key, expected_text, _range(values, fmt), met))

    spec = exp.per_step
    for key, value in spec.items():
        if key == "kernels":
            bound(key, "kernels", f"exactly {value}", lambda v, x=value: v == x, count)
        elif key == "kernels_min":
            bound(key, "kernels", f"≥ {value}", lambda v, x=value: v >= x, count)
        elif key.endswith("_max") and key in _INT_KEYS:
            col = {"kernels_max": "kernels", "launches_max": "launches", "memsets_max": "memsets",
                   "memcpys_max": "memcpys", "round_trip_bytes_max": "round_trip_bytes",
                   "round_trip_tensors_max": "round_trip_tensors"}[key]
            bound(key, col, f"≤ {value:,}", lambda v, x=value: v <= x, count)
        elif key == "gpu_busy_min_pct":
            bound(key, "busy_frac", f"≥ {value}%", lambda v, x=value: 100 * v >= x,
                  lambda v: f"{100 * v:.1f}%")
        elif key.endswith("_max_us"):
            col = {"gpu_time_max_us": "gpu_ns", "cpu_time_max_us": "cpu_dispatch_ns",
                   "idle_time_max_us": "idle_ns", "preop_tax_max_us": "preop_tax_ns"}[key]
            bound(key, col, f"≤ {value:,} µs", lambda v, x=value: v / 1000 <= x, micro)
        elif key == "compile_preops":
            present = [bool(s) for s in _names_per_unit(profile.preops, profile.units, "kind")]
            observed = ("present in every step" if present and all(present) else
                        "absent in every step" if not any(present) else
                        f"present in {sum(present)} of {len(present)} steps")
            items.append(Item(key, "present" if value else "absent", observed,
                              bool(present) and all(p == value for p in present)))
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
                if want_present:
                    met = n_units > 0 and steps_with == n_units
                    observed = (f"{first} in every step" if met else
                                f"in {steps_with} of {n_units} steps" if steps_with else "absent")
                else:
                    met = steps_with == 0
                    observed = "absent" if met else f"{first} in {steps_with} of {n_units} steps"
                items.append(Item(key, pattern, observed, met))
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
