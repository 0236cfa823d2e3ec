"""The diff's verdict rules: which changes count, in which order, and the figures that word them.

Contract: :func:`judge` takes a :class:`~tracekit.results.diff.Diff` and returns its verdict, in
order (:func:`~tracekit.diff.pairwise.diff` stores it as ``Diff.findings``). Every rule of the
verdict lives here — which changes count, how many names are listed before a count takes over — so
a renderer only words what it is given. No clause at all means "no change".

A clause is a :class:`~tracekit.results.verdict.Verdict`: ``kind`` + ``subjects`` (the kernels and
ops it is about, each with its ``role``) + ``quantities`` (numbers, and a few labels such as a
fusion's evidence). Kinds, in verdict order — *when* it is found: *subjects*; *quantities*:

* ``different_devices`` — A and B ran on devices of other names (:class:`~tracekit.analyses.profile.Setup`;
  kernel times are not comparable across devices): ``a``, ``b`` (the device names, joined by
  " + "). ``different_versions`` — a software version both traces state differs (CUDA runtime or
  driver, CUPTI, ROCm, NCCL): one subject per version key (role ``version``, ``changes``
  ``[(key, a, b)]``). ``different_world_size`` — distributed runs of other sizes: ``a``, ``b``.
  These come first (:data:`SETUP_KINDS`): they say how far the rest can be trusted.
* ``per_shape`` — shapes vary within a trace and some are common (:attr:`~tracekit.results.diff.Diff.shapes`):
  units were paired by shape and the figures are per sweep: ``shapes`` (common), ``only_a``,
  ``only_b`` (shapes one side alone ran, left out), ``basis`` (``annotation`` | ``input dims``).
  ``no_common_shape`` — shapes vary and A and B share none: ``shapes_a``, ``shapes_b``; nothing
  structural is compared (no kernel, op or round-trip tensor clause), only totals per sweep.
* ``fusion`` — every fusion (:mod:`~tracekit.diff.align`): before…, after, op… (the fused op
  words), launched_by (the after kernel's CPU op, if any); ``kernels`` (before), ``evidence``.
* ``split`` — every split: before, after…; ``kernels`` (after), ``evidence``.
* ``variant_change`` — any kernel changed variant: before and after of the first
  :data:`MAX_VARIANTS_NAMED` changes, each after with its first :data:`MAX_FIELDS_NAMED` changed
  fields; ``kernels`` (all changed).
* ``replaced`` — each of the first :data:`MAX_REPLACED_NAMED` replacements: before, after.
  ``more_replaced`` — the rest: ``kernels``. ``count_change`` clauses are capped alike: the rest
  are one ``more_count_changes`` clause (``ops``). When A and B ran on devices of other names, a
  replacement (its kernels launched alike, :func:`~tracekit.diff.align.launched_alike`) is the
  device's library choosing another kernel for the same op, not a change of the program:
  ``device_choice`` instead (so is a variant change launched alike) — before, after and
  launched_by (their op) of the first :data:`MAX_REPLACED_NAMED` distinct pairs; ``kernels`` (all of them).
* ``count_change`` — a launching op runs another number of kernels per step, with nothing showing
  a fusion or split (:class:`~tracekit.results.alignment.CountChange`): launched_by (the op), before
  and after (one kernel of it on each side); ``a``, ``b`` (its kernels per step).
* ``removed``, ``added`` — kernels removed / added: each kernel when at most
  :data:`MAX_KERNELS_NAMED`, else none; ``kernels``.
* ``gemms_unchanged`` — a structural change while GEMMs stayed: the kernel when exactly one;
  ``kernels`` (launches of main GEMMs, :func:`~tracekit.diff.align.is_main_gemm`: split-K reduces,
  GEMV and other cuBLAS helpers are not counted, unchanged only when launched alike in A and B);
  ``changed`` (A's main GEMM launches that are not unchanged, present only when some are). Else ``same_kernels`` — a structural change (CPU ops, pre-ops)
  over the very same kernels.
* ``gpu_time`` — GPU time changed, or anything structural did: ``a, b, delta, delta_pct, noise,
  within_noise`` (ns; ``delta_pct`` None when ``a`` is 0).
* ``round_trip_bytes`` — round-trip bytes changed: ``bytes_delta``, ``tensors_delta``; when fewer
  and B fused some away, producer and consumer of the first such tensor, ``shape``,
  ``more_tensors``.
* ``preop_tax`` — compile pre-ops appeared, vanished, or changed outside the noise: ``a, b`` (ns).
* ``cpu_time`` — CPU dispatch changed outside the noise: ``a, b`` (ns).
* ``host_sync`` — a host sync (``aten::item``, ``cudaStreamSynchronize``, a device-to-host copy…,
  :mod:`tracekit.analyses.syncs`) appeared, vanished or changed by at least
  :data:`HOST_SYNC_MIN_NS` and :data:`HOST_SYNC_MIN_FRACTION` of A's time, outside the noise; the
  :data:`MAX_SYNCS_NAMED` largest changes, each: the sync as cpu_op subject; ``a, b`` (ns per
  step), ``count_a, count_b`` (calls per step).
* ``quiet_ops_gone`` — CPU ops that launch no GPU work disappeared: the first
  :data:`MAX_QUIET_OPS_NAMED` as cpu_op subjects; ``ops`` (all of them).
* ``memsets``, ``memcpys`` — hidden memsets / memcpys changed outside the noise: ``a, b, delta``.
* ``graph_launches`` — CUDA-graph launches (``cudaGraphLaunch``, ``hipGraphLaunch``) appeared,
  vanished or changed in number outside the noise: ``a, b`` (per step).
* ``launches`` — launch calls changed outside the noise: ``a, b``.

Quantities are per step (medians over steps, see :mod:`~tracekit.results.diff`); when shapes vary
they are per sweep (one step of each shape) and each figure clause carries ``per`` = ``sweep``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from tracekit.diff.align import is_main_gemm, launched_alike
from tracekit.analyses.profile import KernelRef
from tracekit.results.diff import Diff
from tracekit.results.verdict import Subject, Value, Verdict

#: Changed variants whose fields the verdict names; the rest are only counted.
MAX_VARIANTS_NAMED = 2
#: Changed fields named per changed variant.
MAX_FIELDS_NAMED = 3
#: Replacements named one by one; the rest are counted in one ``more_replaced`` clause.
MAX_REPLACED_NAMED = 2
#: Removed (or added) kernels named; more than this and only their number is given.
MAX_KERNELS_NAMED = 2
#: CPU ops without GPU work named in ``quiet_ops_gone``; the rest are counted.
MAX_QUIET_OPS_NAMED = 4
#: A host sync's change counts when it is at least this many ns per step (less does not stall a
#: step worth a clause) ...
HOST_SYNC_MIN_NS = 100_000
#: ... and at least this fraction of its time in A (a sync that is there anyway and varies a little
#: is not news), and outside the step-to-step noise.
HOST_SYNC_MIN_FRACTION = 0.25
#: Host syncs named in the verdict (largest change first); every one is in the diff's table.
MAX_SYNCS_NAMED = 2
#: Clauses about what the traces ran on, not about what changed; they open the verdict.
SETUP_KINDS = ("different_devices", "different_versions", "different_world_size")


def _kernel(role: str, k: KernelRef, changes: tuple[tuple[str, object, object], ...] = ()) -> Subject:
    return Subject(role, k.name, k.kernel_class, k.decoded, changes)


def _kernels(role: str, ks: Iterable[KernelRef]) -> tuple[Subject, ...]:
    return tuple(_kernel(role, k) for k in ks)


def judge(diff: Diff) -> tuple[Verdict, ...]:
    """The verdict on ``diff``, clause by clause in verdict order (see module docstring)."""
    return (tuple(_setup(diff)) + tuple(_shapes(diff)) + (tuple(_structure(diff)) if diff.structural else ())
            + tuple(_figures(diff)))


def _shapes(diff: Diff) -> list[Verdict]:
    """How units were paired when shapes vary within a trace (see module docstring)."""
    if not diff.structural:
        return [Verdict("no_common_shape", quantities={"shapes_a": len(diff.shapes_only_a),
                                                       "shapes_b": len(diff.shapes_only_b),
                                                       "basis": diff.a.shape_basis})]
    if diff.shapes:
        return [Verdict("per_shape", quantities={"shapes": len(diff.shapes), "only_a": len(diff.shapes_only_a),
                                                 "only_b": len(diff.shapes_only_b), "basis": diff.a.shape_basis})]
    return []


def _setup(diff: Diff) -> list[Verdict]:
    """What differs in what A and B ran on: devices, software versions, world size (each only when
    both traces state it)."""
    a, b = diff.a.setup, diff.b.setup
    out: list[Verdict] = []
    if a.devices and b.devices and a.devices != b.devices:
        out.append(Verdict("different_devices", quantities={"a": " + ".join(a.devices), "b": " + ".join(b.devices)}))
    versions = [Subject("version", key, changes=((key, a.versions[key], b.versions[key]),))
                for key in sorted(set(a.versions) & set(b.versions)) if a.versions[key] != b.versions[key]]
    if versions:
        out.append(Verdict("different_versions", tuple(versions)))
    if a.world_size is not None and b.world_size is not None and a.world_size != b.world_size:
        out.append(Verdict("different_world_size", quantities={"a": a.world_size, "b": b.world_size}))
    return out


def _structure(diff: Diff) -> list[Verdict]:
    """What changed in the kernels: fusions, splits, variants, replacements, removals, additions."""
    al = diff.alignment
    out: list[Verdict] = []
    for f in al.fusions:
        launched = (Subject("launched_by", f.after.cpu_op),) if f.after.cpu_op else ()
        out.append(Verdict("fusion", _kernels("before", f.before) + (_kernel("after", f.after),)
                           + tuple(Subject("op", op) for op in f.ops) + launched,
                           {"kernels": len(f.before), "evidence": f.evidence}))
    for s in al.splits:
        out.append(Verdict("split", (_kernel("before", s.before),) + _kernels("after", s.after),
                           {"kernels": len(s.after), "evidence": s.evidence}))
    if al.changed:
        named = [(_kernel("before", c.before), _kernel("after", c.after, c.fields[:MAX_FIELDS_NAMED]))
                 for c in al.changed[:MAX_VARIANTS_NAMED]]
        out.append(Verdict("variant_change", tuple(s for pair in named for s in pair),
                           {"kernels": len(al.changed)}))
    chosen, replaced = al.device_choices, al.replaced
    if chosen:
        distinct = list({(x.identity, y.identity, x.cpu_op): (x, y) for x, y in chosen}.values())
        named = [s for x, y in distinct[:MAX_REPLACED_NAMED]
                 for s in (_kernel("before", x), _kernel("after", y), Subject("launched_by", x.cpu_op))]
        out.append(Verdict("device_choice", tuple(named), {"kernels": len(chosen)}))
    for x, y in replaced[:MAX_REPLACED_NAMED]:
        out.append(Verdict("replaced", (_kernel("before", x), _kernel("after", y))))
    if len(replaced) > MAX_REPLACED_NAMED:
        out.append(Verdict("more_replaced", quantities={"kernels": len(replaced) - MAX_REPLACED_NAMED}))
    for c in al.count_changes[:MAX_REPLACED_NAMED]:
        out.append(Verdict("count_change", (Subject("launched_by", c.cpu_op), _kernel("before", c.before[0]),
                                            _kernel("after", c.after[0])), {"a": c.a, "b": c.b}))
    if len(al.count_changes) > MAX_REPLACED_NAMED:
        out.append(Verdict("more_count_changes",
                           quantities={"ops": len(al.count_changes) - MAX_REPLACED_NAMED}))
    for kernels, kind in ((al.removed, "removed"), (al.added, "added")):
        if kernels:
            named = _kernels("kernel", kernels) if len(kernels) <= MAX_KERNELS_NAMED else ()
            out.append(Verdict(kind, named, {"kernels": len(kernels)}))
    # Unchanged means launched alike too: the same kernel from another op is not "the same GEMM".
    gemms = [ka for ka, kb in al.unchanged if is_main_gemm(ka) and launched_alike(ka, kb)]
    changed = _main_gemms_in_a(diff) - len(gemms)
    if diff.structural_change and gemms:
        named = _kernels("kernel", gemms) if len(gemms) == 1 else ()
        out.append(Verdict("gemms_unchanged", named, {"kernels": len(gemms), **({"changed": changed} if changed > 0 else {})}))
    elif diff.structural_change and al.is_identical:
        out.append(Verdict("same_kernels"))
    return out


def _main_gemms_in_a(diff: Diff) -> int:
    """Main GEMM launches of A's unit in the alignment (which accounts for each of its kernels once)."""
    al = diff.alignment
    kernels = ([x for x, _ in al.unchanged] + [x for f in al.fusions for x in f.before] + [s.before for s in al.splits]
               + [c.before for c in al.changed] + [x for x, _ in al.replaced] + list(al.removed)
               + [x for c in al.count_changes for x in c.before] + [x for x, _ in al.device_choices])
    return sum(1 for k in kernels if is_main_gemm(k))


def _outside_noise(diff: Diff, key: str) -> bool:
    q = diff.quantities.get(key)
    return q is not None and q.delta != 0 and not q.within_noise


def _figures(diff: Diff) -> list[Verdict]:
    """What changed in the per-step figures, each only when it counts (see module docstring)."""
    out = [replace(f, quantities={**f.quantities, "per": "sweep"}) if diff.per == "sweep" else f
           for f in _figure_clauses(diff)]
    return out


def _figure_clauses(diff: Diff) -> list[Verdict]:
    out: list[Verdict] = []
    q = diff.quantities.get("gpu_time")
    if q is not None and (q.delta != 0 or diff.structural_change):
        out.append(Verdict("gpu_time", quantities={
            "a": q.a, "b": q.b, "delta": q.delta, "delta_pct": q.delta_pct, "noise": q.noise,
            "within_noise": q.within_noise}))
    rt, rn = diff.quantities.get("round_trip_bytes"), diff.quantities.get("round_trip_tensors")
    if rt is not None and rt.delta != 0:
        gone = diff.tensors_fused_away
        quantities: dict[str, Value] = {"bytes_delta": rt.delta, "tensors_delta": rn.delta if rn else 0}
        subjects: tuple[Subject, ...] = ()
        if rt.delta < 0 and gone:
            subjects = (Subject("producer", gone[0]["producer_op"]), Subject("consumer", gone[0]["consumer_op"]))
            quantities.update(shape=gone[0]["shape"], more_tensors=len(gone) - 1)
        out.append(Verdict("round_trip_bytes", subjects, quantities))
    tax = diff.quantities.get("preop_tax")
    if tax is not None and tax.delta != 0 and (tax.a == 0 or tax.b == 0 or not tax.within_noise):
        out.append(Verdict("preop_tax", quantities={"a": tax.a, "b": tax.b}))
    if _outside_noise(diff, "cpu_time"):
        cpu = diff.quantities["cpu_time"]
        out.append(Verdict("cpu_time", quantities={"a": cpu.a, "b": cpu.b}))
    out += _host_syncs(diff)
    quiet = [o for o in diff.cpu_ops_removed if not o.launches_gpu]
    if quiet:
        out.append(Verdict("quiet_ops_gone", tuple(Subject("cpu_op", o.name) for o in quiet[:MAX_QUIET_OPS_NAMED]),
                           {"ops": len(quiet)}))
    for key in ("memsets", "memcpys"):
        if _outside_noise(diff, key):
            hq = diff.quantities[key]
            out.append(Verdict(key, quantities={"a": hq.a, "b": hq.b, "delta": hq.delta}))
    if _outside_noise(diff, "graph_launches"):
        graphs = diff.quantities["graph_launches"]
        out.append(Verdict("graph_launches", quantities={"a": graphs.a, "b": graphs.b}))
    if _outside_noise(diff, "launches"):
        launches = diff.quantities["launches"]
        out.append(Verdict("launches", quantities={"a": launches.a, "b": launches.b}))
    # A serving loop's cost per token, the figure its users compare (said whenever it moved).
    for key in ("prefill_token_time", "decode_token_time"):
        tq = diff.quantities.get(key)
        if tq is not None and tq.delta != 0:
            out.append(Verdict("token_time", quantities={
                "phase": key.split("_")[0], "a": tq.a, "b": tq.b, "delta_pct": tq.delta_pct,
                "noise": tq.noise, "within_noise": tq.within_noise}))
    return out


def _host_syncs(diff: Diff) -> list[Verdict]:
    """Host syncs that appeared, vanished or changed enough to count (see module docstring)."""
    counted = []
    for sync in diff.host_syncs:
        q = sync.quantity
        big = abs(q.delta) >= HOST_SYNC_MIN_NS and abs(q.delta) >= HOST_SYNC_MIN_FRACTION * q.a
        if big and not q.within_noise:
            counted.append(sync)
    counted.sort(key=lambda s: (-abs(s.quantity.delta), s.name))
    return [Verdict("host_sync", (Subject("cpu_op", s.name),),
                    {"a": s.quantity.a, "b": s.quantity.b, "count_a": s.count_a, "count_b": s.count_b})
            for s in counted[:MAX_SYNCS_NAMED]]
