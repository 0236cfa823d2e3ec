"""A diff of two traces' profiles as data: the :class:`Diff` and its noise-aware :class:`Quantity`.

Contract: frozen dataclasses and the noise rule that makes a :class:`Quantity`; nothing here pairs
units or aligns kernels (:mod:`tracekit.diff.pairwise` builds a ``Diff``) or decides what counts
(:mod:`tracekit.diff.diff_verdict` makes ``Diff.findings``, the verdict). Renderers and gates read
these types.

**Noise rule.** Each quantity is measured once per unit. ``a`` and ``b`` are the medians over A's
and B's units, ``delta = b - a``, ``spread`` = max − min over a side's units, and
``noise = max(spread_a, spread_b)``. A change is ``within_noise`` when ``|delta| <= noise`` — it is
then reported as neither a win nor a loss. With the usual 3 profiled steps the spread is a coarse
estimate (it is the range of three samples, not a confidence interval); quantities that do not vary
between steps (kernel counts, bytes) have no noise, so any change to them counts.

**Shapes.** When a trace's units ran several input shapes (a shape sweep), a median over all its
units mixes shapes. Units are then paired by shape (:mod:`tracekit.diff.pairwise`) and every
figure is taken *within* a shape: each :class:`ShapePair` holds the quantities of one shape both
traces ran (medians over that shape's units, the rule above), and the headline quantities are
*per sweep* — one step of each common shape: ``a`` = the sum over the common shapes of A's
median, ``spread_a`` = the sum of A's per-shape spreads (so ``noise`` bounds the sum's noise),
``values_a`` = each compared unit's value, shape by shape (:func:`sweep_quantity`). With no shape
in common, the sums run over each trace's own shapes and nothing structural is compared.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import polars as pl

from tracekit.results.alignment import Alignment, Fusion
from tracekit.results.display import Displayed, short_list, short_name
from tracekit.analyses.profile import Profile
from tracekit.results.verdict import Verdict

if TYPE_CHECKING:
    from tracekit.findings import Finding

NOISE_RULE = ("a, b = median over each trace's steps; spread = max - min over a trace's steps; "
              "noise = max(spread_a, spread_b); a change is within noise when |b - a| <= noise")

#: (key, label, unit, per_unit column) of the headline quantities, in display order.
QUANTITIES: tuple[tuple[str, str, str, str], ...] = (
    ("gpu_time", "GPU time (busy)", "ns", "gpu_ns"),
    ("cpu_time", "CPU dispatch", "ns", "cpu_dispatch_ns"),
    ("idle_time", "GPU idle in step", "ns", "idle_ns"),
    ("kernels", "kernels", "count", "kernels"),
    ("launches", "launch calls", "count", "launches"),
    ("round_trip_bytes", "round-trip bytes", "bytes", "round_trip_bytes"),
    ("round_trip_tensors", "round-trip tensors", "count", "round_trip_tensors"),
    ("memsets", "memsets", "count", "memsets"),
    ("memcpys", "memcpys", "count", "memcpys"),
    ("preop_tax", "compile pre-ops (CPU)", "ns", "preop_tax_ns"),
    ("host_sync", "host syncs (CPU blocked)", "ns", "host_sync_ns"),
    ("graph_launches", "CUDA-graph launches", "count", "graph_launches"),
    ("peak_memory", "peak memory allocated", "bytes", "peak_memory"),
    ("prefill_token_time", "wall per prefill token", "ns", "prefill_token_ns"),
    ("decode_token_time", "wall per decode token", "ns", "decode_token_ns"),
)
#: Quantities only some traces have (``[memory]`` events, a serving loop): compared when both do.
OPTIONAL_QUANTITIES = ("peak_memory", "prefill_token_time", "decode_token_time")


@dataclass(frozen=True)
class Quantity:
    """One per-unit quantity of A and B (see the module's noise rule).

    Attributes
    ----------
    key, label, unit : str
        What it is (``gpu_time``, "GPU time (busy)", ``ns`` | ``bytes`` | ``count``).
    values_a, values_b : tuple of int
        Its value in each of A's and B's units.
    a, b : float
        The medians over A's and B's units.
    delta : float
        ``b - a``.
    delta_pct : float or None
        ``delta`` in % of ``a``; None when ``a`` is 0.
    spread_a, spread_b : float
        Max - min over each side's units.
    noise : float
        ``max(spread_a, spread_b)``.
    within_noise : bool
        ``|delta| <= noise``: neither a win nor a loss.
    """

    key: str
    label: str
    unit: str
    values_a: tuple[int, ...]
    values_b: tuple[int, ...]
    a: float
    b: float
    delta: float
    delta_pct: float | None
    spread_a: float
    spread_b: float
    noise: float
    within_noise: bool

    @property
    def direction(self) -> str:
        """``same`` | ``within noise`` | ``up`` | ``down``."""
        if self.delta == 0:
            return "same"
        if self.within_noise:
            return "within noise"
        return "up" if self.delta > 0 else "down"


def plain_number(x: float) -> float:
    """``x`` as an int when whole, else rounded to 3 decimals (how every figure of a diff is kept)."""
    return int(x) if float(x).is_integer() else round(float(x), 3)


def quantity(key: str, label: str, unit: str, values_a: list[int], values_b: list[int]) -> Quantity:
    """A quantity measured once per unit in A (``values_a``) and B (``values_b``), by the noise rule."""
    a = plain_number(statistics.median(values_a)) if values_a else 0
    b = plain_number(statistics.median(values_b)) if values_b else 0
    spread_a = plain_number(max(values_a) - min(values_a)) if values_a else 0
    spread_b = plain_number(max(values_b) - min(values_b)) if values_b else 0
    noise = max(spread_a, spread_b)
    delta = plain_number(b - a)
    pct = round(100.0 * delta / a, 2) if a else None
    return Quantity(key, label, unit, tuple(values_a), tuple(values_b), a, b, delta, pct,
                    spread_a, spread_b, noise, abs(delta) <= noise)


def sweep_quantity(key: str, label: str, unit: str, groups_a: list[list[int]],
                   groups_b: list[list[int]]) -> Quantity:
    """A quantity per sweep (module docstring, "Shapes"): ``groups_a`` holds A's values shape by
    shape; one group each is :func:`quantity` itself."""
    if len(groups_a) <= 1 and len(groups_b) <= 1:
        return quantity(key, label, unit, groups_a[0] if groups_a else [], groups_b[0] if groups_b else [])

    def side(groups: list[list[int]]) -> tuple[float, float]:
        kept = [g for g in groups if g]
        return (plain_number(sum(statistics.median(g) for g in kept)),
                plain_number(sum(max(g) - min(g) for g in kept)))

    (a, spread_a), (b, spread_b) = side(groups_a), side(groups_b)
    noise = max(spread_a, spread_b)
    delta = plain_number(b - a)
    pct = round(100.0 * delta / a, 2) if a else None
    return Quantity(key, label, unit, tuple(v for g in groups_a for v in g), tuple(v for g in groups_b for v in g),
                    a, b, delta, pct, spread_a, spread_b, noise, abs(delta) <= noise)


@dataclass(frozen=True)
class ShapePair:
    """One input shape both traces ran (module docstring, "Shapes"): its ``key`` (what units are
    paired by, :attr:`tracekit.analyses.profile.Profile.shapes`), A's and B's units of it, and the
    headline quantities over those units alone (medians within the shape)."""

    key: str
    units_a: tuple[int, ...]
    units_b: tuple[int, ...]
    quantities: dict[str, Quantity]


@dataclass(frozen=True)
class KernelTime:
    """An unchanged kernel's GPU time per unit in A and B."""

    name_a: str
    name_b: str
    kernel_class: str
    quantity: Quantity


@dataclass(frozen=True)
class HostSync:
    """What blocked the host waiting for the device (:mod:`tracekit.analyses.syncs`): its time per unit
    (``quantity``) and its calls per unit (medians)."""

    name: str
    quantity: Quantity
    count_a: float
    count_b: float


@dataclass(frozen=True)
class OpChange:
    """A CPU op (``aten::t``…) that appeared or disappeared, with its count and CPU time per unit."""

    name: str
    count: float
    cpu_ns: float
    launches_gpu: bool


@dataclass(frozen=True, repr=False)
class Diff(Displayed):
    """Everything ``tracekit diff`` shows (see module docstring); made by :func:`tracekit.diff.pairwise.diff`.

    Attributes
    ----------
    a, b : tracekit.analyses.profile.Profile
        The two traces unit by unit (A before, B after), their unsteady units left out.
    unit_pairs : tuple of (int, int)
        A's and B's units paired for the kernel alignment: in order, or in order within each
        common shape when shapes vary (``shapes``).
    alignment : tracekit.results.alignment.Alignment
        The kernel alignment most unit pairs agree on (fusions, splits, variant changes, replacements).
    pairs_agreeing : int
        How many unit pairs give exactly that alignment.
    quantities : dict of str to Quantity
        The headline per-unit quantities (:data:`QUANTITIES` keys) with their noise; a key is absent
        when ``unavailable`` names it.
    unavailable : dict of str to str
        Quantities that cannot be compared, with why.
    classes : tuple of Quantity
        GPU time per kernel class (key ``class:<class>``), by class name.
    kernel_times : tuple of KernelTime
        Each unchanged kernel's GPU time, A's largest first.
    cpu_ops_removed, cpu_ops_added : tuple of OpChange
        CPU ops only A has / only B has.
    preops_a, preops_b : dict of str to float
        Compile pre-ops' CPU time per unit (medians, ns) by kind.
    hidden_a, hidden_b : dict of str to float
        Memsets and memcpys per unit (medians) by kind.
    tensors_a, tensors_b, tensors_fused_away : tuple of dict
        Round trips (see the field comments).
    notes : tuple of str
        What the reader must know to trust the comparison (units paired, units left out).
    findings : tuple of tracekit.results.verdict.Verdict
        The verdict as data, in verdict order; empty: no change.
    host_syncs : tuple of HostSync
        Host syncs by name, the largest time first.
    findings_new, findings_resolved : tuple of tracekit.findings.Finding
        Trace findings whose rule only B has / only A has.
    shapes : tuple of ShapePair
        When shapes vary within a trace: the shapes both ran, in A's order (empty otherwise; then
        every figure is per step, a median over all units).
    shapes_only_a, shapes_only_b : tuple of str
        Shapes only A ran / only B ran (left out of every figure when some shape is common).
    aligned_pair : (int, int) or None
        The unit pair whose alignment is reported (its shape is the one ``kernel_times`` and the
        round-trip tensors describe).
    structural : bool
        False when A and B share no shape: only totals per sweep are compared, no kernel, op or
        round-trip tensor.
    """

    #: The result kind: its view is ``tracekit.render.views.diff``, its JSON contract
    #: ``tracekit.render.json.diff`` (the renderers find both by this name).
    kind: ClassVar[str] = "diff"

    a: Profile
    b: Profile
    unit_pairs: tuple[tuple[int, int], ...]
    alignment: Alignment
    pairs_agreeing: int
    quantities: dict[str, Quantity]
    unavailable: dict[str, str]
    classes: tuple[Quantity, ...]
    kernel_times: tuple[KernelTime, ...]
    cpu_ops_removed: tuple[OpChange, ...]
    cpu_ops_added: tuple[OpChange, ...]
    preops_a: dict[str, float]
    preops_b: dict[str, float]
    hidden_a: dict[str, float]
    hidden_b: dict[str, float]
    #: Round trips of A's and B's last unit: ``{producer_op, consumer_op, shape, dtype, bytes}``.
    tensors_a: tuple[dict[str, Any], ...]
    tensors_b: tuple[dict[str, Any], ...]
    #: A's round trips between kernels that B fused (each also has ``fused_into``).
    tensors_fused_away: tuple[dict[str, Any], ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: The verdict as data, in verdict order (:mod:`tracekit.diff.diff_verdict`).
    findings: tuple[Verdict, ...] = ()
    #: Host syncs by name, the largest time (in A or B) first.
    host_syncs: tuple[HostSync, ...] = ()
    #: Trace findings (:mod:`tracekit.findings`) whose rule B has and A has not, and the reverse.
    findings_new: tuple[Finding, ...] = ()
    findings_resolved: tuple[Finding, ...] = ()
    shapes: tuple[ShapePair, ...] = ()
    shapes_only_a: tuple[str, ...] = ()
    shapes_only_b: tuple[str, ...] = ()
    aligned_pair: tuple[int, int] | None = None
    structural: bool = True
    #: The units ``tensors_a`` and ``tensors_b`` come from (None: none).
    tensor_units: tuple[int | None, int | None] = (None, None)

    @property
    def per(self) -> str:
        """What a headline figure is per: ``step`` (a median over all units) or ``sweep`` (one step of
        each shape, see the module docstring)."""
        return "sweep" if self.shapes or not self.structural else "step"

    @property
    def aligned_shape(self) -> str | None:
        """The shape of :attr:`aligned_pair` when shapes vary, else None."""
        if not self.shapes or self.aligned_pair is None:
            return None
        return self.a.shapes.get(self.aligned_pair[0])

    def __repr__(self) -> str:
        """One line: A → B, the unit pairs, GPU time's change, the verdict's clauses by kind
        (``<Diff mlp_eager.json.gz → mlp_compile.json.gz: 3 step pairs, GPU time -11.1%, 8 changes: fusion, …>``);
        in a notebook the diff shows as HTML instead (:mod:`tracekit.results.display`)."""
        pairs = len(self.unit_pairs)
        parts = [f"{pairs} {self.a.unit_kind if self.a.unit_kind != 'ProfilerStep' else 'step'} pair"
                 f"{'s' if pairs != 1 else ''}"]
        gpu = self.quantities.get("gpu_time")
        if gpu is not None:
            change = ("unchanged" if gpu.delta == 0 else "within noise" if gpu.within_noise
                      else f"{gpu.delta_pct:+.1f}%" if gpu.delta_pct is not None else f"{gpu.delta:+,.0f} ns")
            parts.append(f"GPU time {change}")
        kinds = list(dict.fromkeys(f.kind for f in self.findings))
        parts.append(f"{len(self.findings)} change{'s' if len(self.findings) != 1 else ''}"
                     + (f": {short_list(kinds)}" if kinds else ""))
        return f"<Diff {short_name(self.a.label, 50)} → {short_name(self.b.label, 50)}: {', '.join(parts)}>"

    @property
    def per_step(self) -> pl.DataFrame:
        """The headline quantities as a frame (the diff's "Per step" table as data, one row per
        quantity): :attr:`quantities` in their order, then :attr:`classes`, then each common shape's
        quantities (:attr:`shapes`): ``key str, label str, unit str`` (``ns`` | ``bytes`` | ``count``),
        ``a f64, b f64`` (medians over A's and B's units; per sweep when shapes vary), ``delta
        f64, delta_pct f64?`` (None when ``a`` is 0), ``noise f64, within_noise bool, direction str``
        (:attr:`Quantity.direction`), ``shape str?`` (the shape of a per-shape row, else None)."""
        rows = [(q, None) for q in (*self.quantities.values(), *self.classes)]
        rows += [(q, s.key) for s in self.shapes for q in s.quantities.values()]
        return pl.DataFrame(
            {"key": [q.key for q, _ in rows], "label": [q.label for q, _ in rows], "unit": [q.unit for q, _ in rows],
             "a": [float(q.a) for q, _ in rows], "b": [float(q.b) for q, _ in rows],
             "delta": [float(q.delta) for q, _ in rows], "delta_pct": [q.delta_pct for q, _ in rows],
             "noise": [float(q.noise) for q, _ in rows], "within_noise": [q.within_noise for q, _ in rows],
             "direction": [q.direction for q, _ in rows], "shape": [shape for _, shape in rows]},
            schema={"key": pl.String, "label": pl.String, "unit": pl.String, "a": pl.Float64, "b": pl.Float64,
                    "delta": pl.Float64, "delta_pct": pl.Float64, "noise": pl.Float64, "within_noise": pl.Boolean,
                    "direction": pl.String, "shape": pl.String})

    @property
    def structural_change(self) -> bool:
        if not self.structural:
            return False
        return (not self.alignment.is_identical or bool(self.cpu_ops_removed) or bool(self.cpu_ops_added)
                or set(self.preops_a) != set(self.preops_b))


def fusion_record(f: Fusion) -> dict[str, Any]:
    """A fusion as plain data (the JSON contract's ``fusions``): before, after, ops, evidence,
    after_class, after_cpu_op."""
    return {"before": [k.name for k in f.before], "after": f.after.name, "ops": list(f.ops),
            "evidence": f.evidence, "after_class": f.after.kernel_class, "after_cpu_op": f.after.cpu_op}
