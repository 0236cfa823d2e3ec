"""CUDA-graph replays: each replayed activity tied to the op that launched it when the graph was captured.

A replayed graph shows up as one ``cudaGraphLaunch`` and a run of activities under its correlation,
with no op of their own. This module finds, for every such activity, the launch call that created
its graph node at capture, and through it the op, module and annotation — by an exact join where the
data allows it, and says which join it used:

1. **capture** — a capture inside the same trace: the launch calls a thread issued between
   ``cudaStreamBeginCapture`` and ``cudaStreamEndCapture`` (during capture CUDA runs nothing, so these
   calls have no activity of their own). A graph's nodes are numbered in capture order, so node *k*
   is the *k*-th launch call of its capture: matched by ``graph node id`` (its lower 32 bits) where
   the trace records it, else by the replay's activity order. A capture is taken for a graph when
   it issued as many launch calls as a replay runs activities and every call's kind (kernel, memset,
   memcpy) — and, for Inductor's Triton launches, whose op is named after the kernel, the kernel's
   name — agrees position by position; the latest such capture before the graph's first replay wins,
   preferring one whose **warm-up** ran the replay's kernels. PyTorch runs captured code eagerly
   before capturing it (``torch.cuda.graph``'s side-stream warm-up, cudagraph trees' warm-up call,
   vLLM's warm-up runs), so a capture's warm-up — the kernels launched, not replayed, after the
   previous capture ended and before it began — holds the kernels it records, with the grid and block
   of its shape: it agrees when the replay's kernels appear in it in order, name, grid and block equal.
2. **companion capture** — the same join on the captures of a companion trace (``--graph-companion``:
   the capture phase, e.g. a vLLM or SGLang capture-time profile). Captures of several shapes agree
   in kinds alike (a persistent GEMM keeps its name and grid over shapes; a Triton kernel's grid
   follows the shape): the one capture whose warm-up agrees is taken, with a score of 1; when several
   or none do, the latest of those (else of all agreeing) is taken with a score of 1 / their number.
3. **companion** — a companion trace of the same code run eagerly: the replay's activity names are
   looked for, in order, in the companion's launched activities; the window with the most equal
   names is taken, and only the positions whose names are equal are attributed. The match score
   (equal names over the replay's activities) is stated with the graph.
4. **annotation** — the ``name`` PyTorch's annotation script (``torch.cuda._annotate_cuda_graph_trace``,
   fed by ``mark_kernels`` scopes recorded with ``torch.cuda.graph(..., enable_annotations=True)``)
   writes into a replayed activity: the annotation only (it names no op).

Contract: :func:`attribute` takes the linked GPU activities of :mod:`tracekit.analyses.attribution`
(columns of ``Trace.gpu`` plus the launch's ``launch_idx, launch_api, launch_ts, op_idx, cpu_op, top_op,
annotation, module``) and returns them with the replayed rows' ``op_idx, cpu_op, top_op, annotation,
module`` replaced by the capture's (``annotation`` by the annotation script's name where it wrote
one: a ``mark_kernels`` scope is the innermost label the node got at capture), plus
``graph str?`` (the graph a replayed row belongs to: ``"graph <id>"`` with CUPTI's id, else
``"graph #N"`` numbered by first replay), ``graph_source str?`` (``capture`` | ``companion capture`` |
``companion`` | ``annotation``; null when not replayed or not attributed); and a :class:`GraphReplays`:

``graphs`` — one row per graph, by first replay:
    graph str, graph_id i64?, source str?, match str? (``graph node id`` | ``replay order`` |
    ``kernel names``), score f64? (share of a replay's activities matched, 0–1), replays u32,
    activities_per_replay u32 (the most common count), gpu_ns i64 (all replays), attributed_ns i64,
    replay_ns_median / replay_ns_min / replay_ns_max i64 (a replay's span: first start to last end),
    launch_ns_median i64? (the ``cudaGraphLaunch`` call), eager_launch_ns i64? (the matched
    companion window's launch calls, the host time a replay saves vs eager: eager companions only)

and the totals (``gpu_ns`` of all activities, ``replayed_ns``, ``attributed_ns``, ``annotated_ns``),
the captures found, whether the
trace was rewritten by PyTorch's annotation script (``rewritten``: a replayed activity carries an
annotation ``name``; that script also moves every replayed activity onto a lane of its own choosing
— stream 7, 8 for overlaps, 60+ per annotated stream — and clamps their timestamps, so those
streams are not CUDA streams: ``lanes``), and notes.

Companion ops are not ops of this trace: they are numbered from :data:`FOREIGN_BASE` in ``op_idx``
and listed in ``foreign_ops`` (``idx, name, record_function_id (null), input_dims, input_types``) so
that traffic models read their shapes; joins against ``Trace.ops`` find nothing for them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from tracekit.trace import KERNEL_LAUNCH_APIS, Trace

GRAPH_LAUNCH_APIS = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})
CAPTURE_BEGIN = frozenset({"cudaStreamBeginCapture", "cuStreamBeginCapture", "hipStreamBeginCapture"})
CAPTURE_END = frozenset({"cudaStreamEndCapture", "cuStreamEndCapture", "hipStreamEndCapture"})
#: Launch calls that add a node during capture (everything that launches work but a graph).
NODE_APIS = KERNEL_LAUNCH_APIS - GRAPH_LAUNCH_APIS
#: ``op_idx`` of a companion's op: its own idx plus this (no trace holds 2^31 events).
FOREIGN_BASE = 1 << 31
#: A companion window is taken when at least this share of a replay's activity names match.
MIN_NAME_SCORE = 0.5
#: Inductor names its Triton kernels' ops after the kernel: that op name is the kernel's name.
_KERNEL_NAMED_OPS = ("triton_",)
_OP_COLUMNS = ("op_idx", "cpu_op", "top_op", "annotation", "module")

GRAPHS_SCHEMA: dict[str, pl.DataType] = {
    "graph": pl.String, "graph_id": pl.Int64, "source": pl.String, "match": pl.String, "score": pl.Float64,
    "replays": pl.UInt32, "activities_per_replay": pl.UInt32, "gpu_ns": pl.Int64, "attributed_ns": pl.Int64,
    "replay_ns_median": pl.Int64, "replay_ns_min": pl.Int64, "replay_ns_max": pl.Int64,
    "launch_ns_median": pl.Int64, "eager_launch_ns": pl.Int64,
}
FOREIGN_OPS_SCHEMA: dict[str, pl.DataType] = {
    "idx": pl.UInt32, "name": pl.String, "record_function_id": pl.Int64, "input_dims": pl.String,
    "input_types": pl.String,
}


@dataclass(frozen=True)
class GraphReplays:
    """What the trace's CUDA-graph replays are and how they were attributed (module docstring)."""

    graphs: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=GRAPHS_SCHEMA))
    #: GPU time of every kernel, memcpy and memset of the trace, replayed or not.
    gpu_ns: int = 0
    replayed_ns: int = 0
    attributed_ns: int = 0
    annotated_ns: int = 0
    captures: int = 0
    companion: str | None = None
    rewritten: bool = False
    lanes: tuple[int, ...] = ()
    foreign_ops: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FOREIGN_OPS_SCHEMA))
    notes: tuple[str, ...] = ()

    @property
    def attributed_share(self) -> float | None:
        """Attributed share of replayed GPU time (None when nothing was replayed)."""
        return self.attributed_ns / self.replayed_ns if self.replayed_ns else None


@dataclass(frozen=True)
class Companion:
    """What :func:`attribute` reads of a companion trace: its path, its captures and its launched
    activities in launch order (columns of the linked frame), and its ops."""

    path: str
    captures: list[_Capture]
    launched: pl.DataFrame
    ops: pl.DataFrame


@dataclass
class _Capture:
    end_ts: int
    calls: list[dict]  # in issue order: launch_idx, kind, name (known kernel name or None), op columns
    begin_ts: int = 0
    #: The kernels launched (not replayed) after the previous capture ended and before this one began,
    #: in launch order: (name, grid, block) — the warm-up runs of the code it captures.
    warmup: list[tuple] = field(default_factory=list)

    def kinds(self) -> list[str]:
        return [c["kind"] for c in self.calls]

    def warmed(self, rows: list[dict]) -> bool:
        """Whether the warm-up launched the replay's kernels (``rows``), name, grid and block equal,
        in order (other launches between them: autotuning, copies)."""
        want = [(r["name"], r["grid"], r["block"]) for r in rows if r["kind"] == "kernel"]
        launched = iter(self.warmup)
        return bool(want) and all(any(k == w for k in launched) for w in want)


def captures(trace: Trace, launches: pl.DataFrame, launched: pl.DataFrame | None = None) -> list[_Capture]:
    """The captures of ``trace`` that issued launch calls: each thread's begin/end capture pairs, in
    order, with the launch calls between them (``launches``: the op tree's launch frame), and — with
    ``launched`` (:func:`launched_work`) — each one's warm-up kernels."""
    marks = trace.launches.filter(pl.col("name").is_in(list(CAPTURE_BEGIN | CAPTURE_END))).sort(["ts", "idx"])
    if marks.height == 0:
        return []
    calls = launches.filter(pl.col("name").is_in(list(NODE_APIS))).sort(["ts", "idx"])
    found = []
    open_at: dict[tuple[str, str], int] = {}
    for name, pid, tid, ts, end in marks.select("name", "pid", "tid", "ts", "end").iter_rows():
        if name in CAPTURE_BEGIN:
            open_at[(pid, tid)] = ts
            continue
        start = open_at.pop((pid, tid), None)
        if start is None:
            continue
        inside = calls.filter((pl.col("pid") == pid) & (pl.col("tid") == tid)
                              & (pl.col("ts") >= start) & (pl.col("ts") <= end))
        if inside.height:
            found.append(_Capture(end, [_call(row) for row in inside.iter_rows(named=True)], start))
    if launched is not None:
        _add_warmups(found, launched)
    return found


def launched_work(linked: pl.DataFrame) -> pl.DataFrame:
    """The activities of ``linked`` launched by a launch call (not a graph's), in launch order."""
    return (linked.filter(pl.col("launch_idx").is_not_null()
                          & ~pl.col("launch_api").is_in(list(GRAPH_LAUNCH_APIS)).fill_null(False))
            .sort(["launch_ts", "launch_idx", "ts", "idx"])
            .select("kind", "name", "grid", "block", *_OP_COLUMNS, "launch_idx", "launch_ts", "launch_end"))


def _add_warmups(found: list[_Capture], launched: pl.DataFrame) -> None:
    """Each capture's warm-up (:class:`_Capture`): PyTorch runs the code eagerly before capturing it
    (``torch.cuda.graph``'s side-stream warm-up, cudagraph trees' warm-up call, vLLM's warm-up runs),
    so its kernels, grids and blocks are the ones the capture records for that shape."""
    kernels = launched.filter(pl.col("kind") == "kernel")
    ts = kernels.get_column("launch_ts")
    rows = list(zip(*(kernels.get_column(c).to_list() for c in ("name", "grid", "block"))))
    previous_end = None
    for cap in sorted(found, key=lambda c: c.begin_ts):
        lo = 0 if previous_end is None else ts.search_sorted(previous_end, side="left")
        hi = ts.search_sorted(cap.begin_ts, side="left")
        cap.warmup = rows[lo:hi]
        previous_end = cap.end_ts


def _call(row: dict) -> dict:
    api = row["name"] or ""
    kind = "memset" if "Memset" in api else "memcpy" if "Memcpy" in api else "kernel"
    op = row.get("cpu_op") or ""
    known = op if kind == "kernel" and op.startswith(_KERNEL_NAMED_OPS) else None
    return {"kind": kind, "name": known, **{c: row.get(c) for c in _OP_COLUMNS}}


def companion(path: str, trace: Trace, launches: pl.DataFrame, linked: pl.DataFrame,
              ops: pl.DataFrame) -> Companion:
    """A companion trace as :func:`attribute` reads it (``launches``/``ops``: its op tree's frames,
    ``linked``: its linked GPU activities)."""
    launched = launched_work(linked)
    return Companion(path, captures(trace, launches, launched), launched,
                     ops.select("idx", "name", "record_function_id", "input_dims", "input_types"))


def attribute(trace: Trace, linked: pl.DataFrame, launches: pl.DataFrame,
              other: Companion | None = None) -> tuple[pl.DataFrame, GraphReplays]:
    """``linked`` with replayed rows attributed, and the :class:`GraphReplays` (module docstring)."""
    linked = linked.with_columns(graph=pl.lit(None, pl.String), graph_source=pl.lit(None, pl.String))
    is_graph = pl.col("launch_api").is_in(list(GRAPH_LAUNCH_APIS)).fill_null(False)
    replayed = linked.filter(is_graph).sort(["launch_idx", "ts", "idx"])
    annotated = linked.filter(pl.col("graph_annotation").is_not_null())
    rewritten = annotated.height > 0
    if replayed.height == 0 and not rewritten:
        return linked, GraphReplays(companion=other.path if other else None,
                                    gpu_ns=int(linked.get_column("dur").sum() or 0))
    found = captures(trace, launches, launched_work(linked))
    plan = _Plan(replayed, found, other)
    mapping = plan.mapping()
    graph_of = pl.DataFrame({"idx": plan.row_idx, "_graph": plan.row_graph, "_pos": plan.row_pos},
                            schema={"idx": pl.UInt32, "_graph": pl.String, "_pos": pl.UInt32})
    joined = linked.join(graph_of, on="idx", how="left", maintain_order="left").join(
        mapping, on=["_graph", "_pos"], how="left", maintain_order="left")
    hit = pl.col("_source").is_not_null()
    out = joined.with_columns(
        *[pl.when(hit).then(pl.col("_" + c)).otherwise(pl.col(c)).alias(c) for c in _OP_COLUMNS],
        graph=pl.col("_graph"), graph_source=pl.col("_source"),
    ).with_columns(
        # A mark_kernels scope is the innermost label the user gave the node at capture.
        annotation=pl.coalesce("graph_annotation", "annotation"),
        graph_source=pl.when(pl.col("graph_annotation").is_not_null() & ~hit).then(pl.lit("annotation"))
        .otherwise(pl.col("graph_source")),
    ).drop([c for c in joined.columns if c.startswith("_")])
    report = _report(out, plan, replayed, found, other, rewritten, annotated)
    return out, report


class _Plan:
    """The graphs of the replays, each graph's source, and the attribution of each position."""

    def __init__(self, replayed: pl.DataFrame, found: list[_Capture], other: Companion | None) -> None:
        self.row_idx: list[int] = []
        self.row_graph: list[str] = []
        self.row_pos: list[int] = []
        self.graphs: dict[str, dict] = {}  # graph -> its facts, in first-replay order
        self.found, self.other = found, other
        signatures: dict[tuple, str] = {}
        agreeing: dict[tuple, list[int]] = {}  # signature -> the captures that agree with it
        cols = replayed.select("idx", "launch_idx", "kind", "name", "grid", "block", "graph_id", "graph_node_id",
                               "ts", "end", "dur", "launch_ts", "launch_end")
        for (launch,), part in cols.group_by("launch_idx", maintain_order=True):
            rows = list(part.iter_rows(named=True))
            by_node = all(r["graph_node_id"] for r in rows)
            if by_node:
                rows.sort(key=lambda r: (r["graph_node_id"], r["ts"], r["idx"]))
            gid = rows[0]["graph_id"] if rows[0]["graph_id"] else None
            sig = tuple((r["kind"], r["name"], r["grid"], r["block"]) for r in rows)
            if by_node:
                low = [r["graph_node_id"] & 0xFFFFFFFF for r in rows]
                positions = low if len(set(low)) == len(low) else list(range(len(rows)))
            else:
                positions = list(range(len(rows)))
            if gid is not None:
                key = f"graph {gid}"
                capture = None
            else:
                # Without CUPTI's graph id, graphs of two shapes can replay the same kernels (a
                # persistent GEMM's grid does not follow the shape): a replay is of the graph its
                # latest agreeing capture made — among those whose warm-up ran its kernels, grids
                # and blocks, when any did — so that capture is part of the graph's identity.
                if sig not in agreeing:
                    agreeing[sig] = [i for i, cap in enumerate(found) if _agrees(rows, positions, cap)]
                before = [i for i in agreeing[sig] if found[i].end_ts <= rows[0]["launch_ts"]]
                warmed = [i for i in before if found[i].warmed(rows)]
                capture = (warmed or before)[-1] if before else None
                key = signatures.setdefault((sig, capture), f"graph #{len(signatures) + 1}")
            facts = self.graphs.get(key)
            if facts is None:
                facts = self.graphs[key] = {"graph_id": gid, "signature": sig, "by_node": by_node,
                                            "first_ts": rows[0]["launch_ts"], "replays": [], "capture": capture}
            facts["replays"].append((rows, positions))
            for r, p in zip(rows, positions):
                self.row_idx.append(r["idx"])
                self.row_graph.append(key)
                self.row_pos.append(p)

    def mapping(self) -> pl.DataFrame:
        """(``_graph``, ``_pos``) → the attributed op columns, ``_source``."""
        keys, positions, sources = [], [], []
        values: dict[str, list] = {c: [] for c in _OP_COLUMNS}
        for key, facts in self.graphs.items():
            source, match, score, calls, eager = self._source(facts)
            facts.update(source=source, match=match, score=score, eager_launch_ns=eager)
            for pos, call in calls.items():
                keys.append(key)
                positions.append(pos)
                sources.append(source)
                for c in _OP_COLUMNS:
                    values[c].append(call[c])
        return pl.DataFrame({"_graph": keys, "_pos": positions, "_source": sources,
                             **{"_" + c: v for c, v in values.items()}},
                            schema={"_graph": pl.String, "_pos": pl.UInt32, "_source": pl.String,
                                    "_op_idx": pl.UInt32, "_cpu_op": pl.String, "_top_op": pl.String,
                                    "_annotation": pl.String, "_module": pl.String})

    def _source(self, facts: dict) -> tuple:
        """(source, match, score, {position: call}, eager launch ns) of one graph."""
        rows, positions = facts["replays"][0]
        match = "graph node id" if facts["by_node"] else "replay order"
        if facts["capture"] is not None:
            cap = self.found[facts["capture"]]
            return ("capture", match, 1.0, {p: cap.calls[p] for p in positions}, None)
        before = [c for c in self.found if c.end_ts <= facts["first_ts"]]
        best = _best_capture(rows, positions, before[::-1])
        if best is not None:
            return ("capture", match, best[0], best[1], None)
        if self.other is not None:
            agreeing = [cap for cap in self.other.captures[::-1] if _agrees(rows, positions, cap)]
            # Captures of several shapes agree in kinds alike: the one whose warm-up ran the replay's
            # kernels with its grids and blocks is the replay's shape; several such are ambiguous.
            warmed = [cap for cap in agreeing if cap.warmed(rows)]
            pool = warmed or agreeing
            if pool:
                return ("companion capture", match, 1.0 / len(pool),
                        _foreign({p: pool[0].calls[p] for p in positions}), None)
            named = _by_names(rows, positions, self.other.launched)
            if named is not None:
                return ("companion", "kernel names", named[0], _foreign(named[1]), named[2])
        return (None, None, None, {}, None)


def _best_capture(rows: list[dict], positions: list[int], candidates: list[_Capture]) -> tuple | None:
    """(score, {position: call}) of the first of ``candidates`` whose launch calls agree with the
    replay position by position and whose warm-up ran its kernels — else the first that agrees
    (module docstring, 1.); None when none does."""
    agreeing = [cap for cap in candidates if _agrees(rows, positions, cap)]
    best = next((cap for cap in agreeing if cap.warmed(rows)), agreeing[0] if agreeing else None)
    return None if best is None else (1.0, {p: best.calls[p] for p in positions})


def _agrees(rows: list[dict], positions: list[int], cap: _Capture) -> bool:
    """Whether ``cap``'s launch calls agree with the replay position by position (module docstring, 1.)."""
    return len(cap.calls) == max(positions, default=-1) + 1 and all(
        cap.calls[p]["kind"] == r["kind"] and (cap.calls[p]["name"] is None or cap.calls[p]["name"] == r["name"])
        for r, p in zip(rows, positions))


def _by_names(rows: list[dict], positions: list[int], launched: pl.DataFrame) -> tuple | None:
    """(score, {position: call}, eager launch ns) of the companion window whose activity names agree
    most with the replay's, in order (module docstring, 3.); None below :data:`MIN_NAME_SCORE`."""
    names = launched.get_column("name").to_list()
    want = [r["name"] for r in rows]
    n = len(want)
    if n == 0 or len(names) < n:
        return None
    # Anchor on the replay's rarest name in the companion: every window holding it starts there.
    counts = Counter(names)
    anchor = min(range(n), key=lambda j: (counts.get(want[j], 0) or len(names) + 1, j))
    if not counts.get(want[anchor]):
        return None
    best, best_start = -1, None
    for i, name in enumerate(names):
        start = i - anchor
        if name != want[anchor] or start < 0 or start + n > len(names):
            continue
        equal = sum(a == b for a, b in zip(names[start:start + n], want))
        if equal >= best:  # the latest of equal windows: past the companion's warm-up
            best, best_start = equal, start
    if best_start is None or best / n < MIN_NAME_SCORE:
        return None
    window = launched.slice(best_start, n)
    calls = {p: row for p, row, name in zip(positions, window.iter_rows(named=True), want)
             if row["name"] == name}
    eager = window.unique("launch_idx").select((pl.col("launch_end") - pl.col("launch_ts")).sum()).item()
    return best / n, calls, eager


def _foreign(calls: dict[int, dict]) -> dict[int, dict]:
    """Companion calls with their ``op_idx`` moved past :data:`FOREIGN_BASE`."""
    return {p: {**c, "op_idx": None if c["op_idx"] is None else c["op_idx"] + FOREIGN_BASE}
            for p, c in calls.items()}


def _report(out: pl.DataFrame, plan: _Plan, replayed: pl.DataFrame, found: list[_Capture],
            other: Companion | None, rewritten: bool, annotated: pl.DataFrame) -> GraphReplays:
    rows_out = out.filter(pl.col("graph").is_not_null())
    attributed = rows_out.filter(pl.col("graph_source").is_in(["capture", "companion capture", "companion"]))
    table = []
    per_graph = {k: (g.get_column("dur").sum(), g.filter(pl.col("graph_source").is_in(
        ["capture", "companion capture", "companion"])).get_column("dur").sum())
        for (k,), g in rows_out.group_by("graph")}
    for key, facts in plan.graphs.items():
        spans = [max(r["end"] for r in rows) - min(r["ts"] for r in rows) for rows, _ in facts["replays"]]
        launch = [rows[0]["launch_end"] - rows[0]["launch_ts"] for rows, _ in facts["replays"]]
        counts = Counter(len(rows) for rows, _ in facts["replays"])
        gpu, hit = per_graph.get(key, (0, 0))
        table.append({
            "graph": key, "graph_id": facts["graph_id"], "source": facts.get("source"),
            "match": facts.get("match"), "score": facts.get("score"), "replays": len(facts["replays"]),
            "activities_per_replay": counts.most_common(1)[0][0], "gpu_ns": gpu, "attributed_ns": hit,
            "replay_ns_median": sorted(spans)[(len(spans) - 1) // 2], "replay_ns_min": min(spans),
            "replay_ns_max": max(spans), "launch_ns_median": sorted(launch)[(len(launch) - 1) // 2],
            "eager_launch_ns": facts.get("eager_launch_ns"),
        })
    graphs = pl.DataFrame(table, schema=GRAPHS_SCHEMA) if table else pl.DataFrame(schema=GRAPHS_SCHEMA)
    foreign = pl.DataFrame(schema=FOREIGN_OPS_SCHEMA)
    if other is not None:
        used = attributed.filter(pl.col("op_idx") >= FOREIGN_BASE).get_column("op_idx").unique()
        foreign = (other.ops.filter(pl.col("idx").is_in((used - FOREIGN_BASE).cast(pl.UInt32).implode()))
                   .with_columns(idx=(pl.col("idx").cast(pl.Int64) + FOREIGN_BASE).cast(pl.UInt32),
                                 record_function_id=pl.lit(None, pl.Int64))
                   .select(list(FOREIGN_OPS_SCHEMA)).cast(FOREIGN_OPS_SCHEMA))  # type: ignore[arg-type]
    notes = []
    lanes: tuple[int, ...] = ()
    if rewritten:
        lanes = tuple(sorted(int(s) for s in out.filter(pl.col("graph_node_id").fill_null(0) != 0)
                             .get_column("stream").drop_nulls().unique().to_list()))
        notes.append("rewritten by PyTorch's CUDA-graph annotation script: replayed activities were moved "
                     f"to lanes {', '.join(map(str, lanes))} and their timestamps clamped; those lanes are "
                     "not CUDA streams")
    unlinked = out.filter(pl.col("launch_idx").is_null() & (pl.col("graph_node_id").fill_null(0) != 0))
    if unlinked.height:
        notes.append(f"{unlinked.height} replayed activities have no graph launch call in the trace")
    return GraphReplays(
        graphs=graphs, gpu_ns=int(out.get_column("dur").sum() or 0),
        replayed_ns=int(replayed.get_column("dur").sum() or 0),
        attributed_ns=int(attributed.get_column("dur").sum() or 0),
        annotated_ns=int(annotated.get_column("dur").sum() or 0), captures=len(found),
        companion=other.path if other else None, rewritten=rewritten, lanes=lanes, foreign_ops=foreign,
        notes=tuple(notes))
