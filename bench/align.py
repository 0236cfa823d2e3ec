"""How long ``tracekit diff``'s kernel alignment takes as units grow: synthetic and real sequences.

    python bench/align.py [--sizes 1000,4000,12000,50000] [--real DIR] [--repeat 3]

Times :func:`tracekit.diff.align.align` alone (the part of a diff that grows with the kernels per
unit) on pairs of kernel sequences of each size, and prints a Markdown table: wall seconds (the
best of ``--repeat`` runs), and what the alignment found (unchanged, fused, changed, removed/added
kernels; its notes when it fell back or went coarse).

Sequences:

* ``few common names`` — A and B draw from 8 names each, sharing only 1–2 (the shape that made the
  quadratic alignment take minutes: long units that mostly differ).
* ``layered`` — a 14-kernel "layer" (two GEMMs and 12 elementwise kernels) repeated; in B two
  elementwise kernels of each layer are one Inductor kernel, and one layer in 20 launches an extra
  kernel.
* ``real: <trace>, shifted`` — the kernel sequence of a real trace (its units' sequences one after
  the other, the ``KernelRef`` objects ``diff`` builds), repeated to the size; B is the same cut
  half a sequence later, as when two traces' units start at different points of the iteration.
* ``real: <trace>, perturbed`` — B is A with every 50th kernel dropped and a new kernel launched
  every 97th.

Real traces: ``sample_traces/train_eager.json.gz`` (shipped) and, from ``--real DIR`` (default:
the folder named by ``TRACEKIT_REAL_TRACES``), the vLLM decode trace (13,530 kernels) and the
ResNet training trace when present. Nothing is written.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tracekit

from tracekit.diff import align  # noqa: E402
from tracekit.results.alignment import Alignment  # noqa: E402
from tracekit.analyses.profile import KernelRef  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: Real traces from --real DIR that are used when present: (file, label).
REAL = (("Navi-AI-Lab__nvllm__vllm-gb10-flashinfer-cudagraph-decode.json.gz", "vLLM decode (GB10)"),
        ("facebookresearch__param__resnet-2080ti-cudnn-train.json.gz", "ResNet training (2080 Ti)"))


def ref(name: str, cls: str = "elementwise", cpu_op: str = "aten::mul", **decoded) -> KernelRef:
    return KernelRef(name, name, cls, cpu_op, cpu_op, decoded)


def few_common(n: int, rng: random.Random) -> tuple[tuple[KernelRef, ...], tuple[KernelRef, ...]]:
    pool_a = [ref(f"a{i}_kernel") for i in range(8)]
    pool_b = [ref(f"b{i}_kernel") for i in range(8)]
    common = [ref("c0_kernel"), ref("c1_kernel")]
    return (tuple(rng.choice(pool_a + common[:1]) for _ in range(n)),
            tuple(rng.choice(pool_b + common) for _ in range(n)))


def layered(n: int, rng: random.Random) -> tuple[tuple[KernelRef, ...], tuple[KernelRef, ...]]:
    kernels = [ref(f"k{i}_kernel") for i in range(12)]
    g1, g2 = ref("gemm_qkv", "gemm", "aten::mm", op="gemm"), ref("gemm_out", "gemm", "aten::mm", op="gemm")
    fused = ref("triton_poi_fused_k3_k4_0", "triton_fused", "triton_poi_fused_k3_k4_0", kind="pointwise",
                fused_ops=["k3", "k4"])
    layer_a = [g1, *kernels[:6], g2, *kernels[6:]]
    layer_b = [g1, *kernels[:3], fused, *kernels[5:6], g2, *kernels[6:]]
    extra = [ref(f"new{i}_kernel") for i in range(30)]
    a: list[KernelRef] = []
    b: list[KernelRef] = []
    while len(a) < n:
        a += layer_a
        b += layer_b + ([rng.choice(extra)] if rng.random() < 0.05 else [])
    return tuple(a[:n]), tuple(b[:n])


def real_sequence(path: Path) -> tuple[KernelRef, ...]:
    import tracekit

    p = tracekit.open(path).profile()
    return tuple(k for u in p.units for k in p.sequences[u])


def repeated(unit: tuple[KernelRef, ...], n: int, start: int = 0) -> tuple[KernelRef, ...]:
    return tuple(unit[(start + i) % len(unit)] for i in range(n))


def perturbed(seq: tuple[KernelRef, ...]) -> tuple[KernelRef, ...]:
    new = ref("inserted_kernel", "triton_custom", "MyFunction")
    out: list[KernelRef] = []
    for i, k in enumerate(seq):
        if i % 97 == 0:
            out.append(new)
        if i % 50:
            out.append(k)
    return tuple(out)


def measure(a, b, repeat: int) -> tuple[float, Alignment]:
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = align.align(a, b)
        best = min(best, time.perf_counter() - t)
    assert result is not None
    return best, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,4000,12000,50000")
    parser.add_argument("--real", type=Path, default=os.environ.get("TRACEKIT_REAL_TRACES"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    cases: list[tuple[str, object]] = [("few common names", few_common), ("layered", layered)]
    sources = [(ROOT / "sample_traces" / "train_eager.json.gz", "train_eager (H200)")]
    if args.real:
        sources += [(Path(args.real) / f, label) for f, label in REAL if (Path(args.real) / f).is_file()]
    for path, label in sources:
        unit = real_sequence(path)
        cases.append((f"real: {label} ({len(unit):,} kernels), shifted",
                      lambda n, _rng, u=unit: (repeated(u, n), repeated(u, n, len(u) // 2))))
        cases.append((f"real: {label} ({len(unit):,} kernels), perturbed",
                      lambda n, _rng, u=unit: (repeated(u, n), perturbed(repeated(u, n)))))

    print("| sequences | kernels A / B | seconds | unchanged | fusions | changed | removed / added | notes |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for label, make in cases:
        for n in sizes:
            a, b = make(n, random.Random(n))  # type: ignore[operator]
            seconds, al = measure(a, b, args.repeat)
            notes = "; ".join(al.notes) or ""
            print(f"| {label} | {len(a):,} / {len(b):,} | {seconds:.3f} | {len(al.unchanged):,} | "
                  f"{len(al.fusions):,} | {len(al.changed):,} | {len(al.removed):,} / {len(al.added):,} | {notes} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
