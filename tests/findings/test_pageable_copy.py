"""pageable_copy on hand-built loops, and the host-link table it prices with. Family: a large
host↔device copy from pageable memory (an unpinned batch) every step (fires, priced against the
device's link); near misses: the same copy from pinned memory, and small pageable copies (their cost
is the synchronisation: host_sync's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from factory import make_kernel, make_launch, make_op, make_step, write_trace

import tracekit
from tracekit import host_link
from tracekit.findings.detectors import pageable_copy


def _loop(tmp_path: Path, src: str, nbytes: int, copy_us: float) -> Path:
    """Three 6 ms steps, each copying ``nbytes`` HtoD from ``src`` memory under ``aten::to`` (the copy
    runs ``copy_us``), then a 500 µs kernel."""
    events: list[dict] = []
    for i in range(3):
        t0 = 10.0 + i * 6010.0
        events += [make_step(i, t0, 6000),
                   make_op("aten::to", t0 + 10, copy_us + 20), make_op("aten::copy_", t0 + 11, copy_us + 18),
                   make_launch("cudaMemcpyAsync", t0 + 12, copy_us + 10, 10 * i + 1),
                   make_kernel(f"Memcpy HtoD ({src} -> Device)", t0 + 15, copy_us, 10 * i + 1, kind="memcpy",
                               bytes=nbytes),
                   make_op("aten::relu", t0 + copy_us + 40, 7),
                   make_launch("cudaLaunchKernel", t0 + copy_us + 41, 5, 10 * i + 2),
                   make_kernel("void at::native::vectorized_elementwise_kernel<4>()", t0 + copy_us + 50, 500,
                               10 * i + 2)]
    return write_trace(tmp_path / "t.json", events)


def _finding(path: Path, rule: str = "pageable_copy"):
    return next((f for f in tracekit.open(str(path)).report().findings if f.rule == rule), None)


def test_fires_on_a_large_pageable_copy_priced_at_the_devices_link(tmp_path):
    f = _finding(_loop(tmp_path, "Pageable", 32 << 20, 5000))
    assert f is not None and f.severity == "warning" and f.resource == "gpu"
    (e,) = f.evidence
    assert (e.name, e.bytes_per_step, e.detail) == ("Memcpy HtoD (Pageable -> Device)", 32 << 20,
                                                      "launched by aten::to")
    # The factory's device is an H200: PCIe Gen5, 50 GB/s pinned. 32 MiB then takes 671.09 µs.
    assert f.quantities["pinned_bytes_per_s"] == 50e9 and "PCIe Gen5" in f.saving_basis
    assert f.cost_ns_per_step == 5_000_000 and f.saving_ns_per_step == 5_000_000 - 671_089


def test_silent_on_pinned_and_on_small_pageable_copies(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert _finding(_loop(tmp_path / "a", "Pinned", 32 << 20, 5000)) is None
    # Below PAGEABLE_COPY_MIN_BYTES a copy's cost is its synchronisation, not the link's bandwidth.
    assert _finding(_loop(tmp_path / "b", "Pageable", pageable_copy.PAGEABLE_COPY_MIN_BYTES - 1, 5000)) is None


@pytest.mark.parametrize(("name", "cc", "link"), [
    ("Tesla V100-SXM2-32GB", "7.0", "PCIe Gen3 x16"),
    ("NVIDIA GeForce RTX 2080 Ti", "7.5", "PCIe Gen3 x16"),
    ("NVIDIA A100-SXM4-40GB", "8.0", "PCIe Gen4 x16"),
    ("NVIDIA GeForce RTX 4090", "8.9", "PCIe Gen4 x16"),
    ("NVIDIA H200", "9.0", "PCIe Gen5 x16"),
    ("NVIDIA GH200 480GB", "9.0", "NVLink-C2C"),
    ("AMD Instinct MI300X", None, "PCIe Gen5 x16"),
    ("Some Future GPU", "8.6", "PCIe Gen4 x16"),  # the name unknown: the compute capability decides
])
def test_host_link_by_device(name, cc, link):
    assert host_link.link_for(name, cc).name == link


def test_host_link_unknown():
    assert host_link.link_for("Some Accelerator", None) is None
    assert host_link.link_for("", "x") is None
